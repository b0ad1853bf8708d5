// Launchers of the elementwise CUDA kernels (kernels/cuda/elementwise.cu):
// casts, scaled adds, padding masks, ReLU / Swish / GLU and dropout. Half
// values are computed in float with the per-element math of
// kernels/activations.h and kernels/philox.h, then rounded to half once.
// All pointers are device pointers, except where a comment says host.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mpiasr {

void cuda_cast(__half* dst, const float* src, size_t n, cudaStream_t stream);
void cuda_cast(float* dst, const __half* src, size_t n, cudaStream_t stream);
// y = x + alpha r (y may alias x or r)
void cuda_add_scaled(__half* y, const __half* x, const __half* r, float alpha, size_t n,
                     cudaStream_t stream);
// dy += alpha dx
void cuda_accumulate_scaled(__half* dy, const __half* dx, float alpha, size_t n,
                            cudaStream_t stream);
// x [B, T, C]: rows t >= lengths[b] set to zero (lengths on the device)
void cuda_mask_padding(__half* x, const int32_t* lengths, int B, int T, int C, cudaStream_t stream);

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

// out[i] = dropout_keep(seed, offset + i, p) ? inp[i] / (1 - p) : 0 (out may alias inp);
// the backward pass is the same map applied to the gradient.
void cuda_dropout(__half* out, const __half* inp, float p, uint64_t seed, uint64_t offset, size_t n,
                  cudaStream_t stream);

}  // namespace mpiasr
