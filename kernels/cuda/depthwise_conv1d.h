// Launchers of the GLU + masked depthwise Conv1d kernels
// (kernels/cuda/depthwise_conv1d.cu), over T = __half or __nv_bfloat16.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mpiasr {

// out [B, T, C] from the GLU of inp [B, T, 2C], weight [C, K], bias [C] (may
// be null); lengths [B] on the device. Frames t >= lengths[b] read as zeros
// and are written as zeros.
template <typename T>
void cuda_glu_depthwise_conv1d_forward(T* out, const T* inp, const T* weight, const T* bias,
                                       const int32_t* lengths, int B, int T_, int C, int K,
                                       cudaStream_t stream);

// Floats of scratch cuda_glu_depthwise_conv1d_backward needs for these shapes.
size_t glu_depthwise_conv1d_partials(int B, int T_, int C, int K);

// dinp [B, T, 2C] (overwritten, may be null); dweight [C, K], dbias [C] +=
// (may be null).
template <typename T>
void cuda_glu_depthwise_conv1d_backward(T* dinp, float* dweight, float* dbias, const T* dout,
                                        const T* inp, const T* weight, const int32_t* lengths,
                                        int B, int T_, int C, int K, float* partials,
                                        cudaStream_t stream);

}  // namespace mpiasr
