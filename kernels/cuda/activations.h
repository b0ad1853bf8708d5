// Launchers of the activation kernels (kernels/cuda/activations.cu): ReLU,
// Swish and GLU forward and backward, in float with the per-element math of
// kernels/activations.h, rounded to half once. All pointers are device
// pointers; input gradients are overwritten.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mpiasr {

void cuda_relu_forward(__half* out, const __half* inp, size_t n, cudaStream_t stream);
void cuda_relu_backward(__half* dinp, const __half* dout, const __half* inp, size_t n,
                        cudaStream_t stream);
void cuda_swish_forward(__half* out, const __half* inp, size_t n, cudaStream_t stream);
void cuda_swish_backward(__half* dinp, const __half* dout, const __half* inp, size_t n,
                         cudaStream_t stream);
// inp [N, 2C] -> out [N, C]: out = a sigmoid(b)
void cuda_glu_forward(__half* out, const __half* inp, int N, int C, cudaStream_t stream);
void cuda_glu_backward(__half* dinp, const __half* dout, const __half* inp, int N, int C,
                       cudaStream_t stream);

}  // namespace mpiasr
