// Launchers of the masked depthwise Conv1d kernels (kernels/cuda/depthwise_conv1d.cu).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace mpiasr {

// out [B, T, C] from inp [B, T, C], weight [C, K], bias [C] (may be null);
// lengths [B] on the device. Frames t >= lengths[b] read as zeros and are
// written as zeros.
void cuda_depthwise_conv1d_forward(__half* out, const __half* inp, const __half* weight,
                                   const __half* bias, const int32_t* lengths, int B, int T, int C,
                                   int K, cudaStream_t stream);

// Floats of scratch cuda_depthwise_conv1d_backward needs for these shapes.
size_t depthwise_conv1d_partials(int B, int T, int C, int K);

// dinp (overwritten, may be null); dweight [C, K], dbias [C] += (may be null).
void cuda_depthwise_conv1d_backward(__half* dinp, float* dweight, float* dbias, const __half* dout,
                                    const __half* inp, const __half* weight, const int32_t* lengths,
                                    int B, int T, int C, int K, float* partials,
                                    cudaStream_t stream);

}  // namespace mpiasr
