// Launchers of the LayerNorm kernels (kernels/cuda/layernorm.cu), alone and
// fused with the residual sum before it or the Swish after it (the ops of
// kernels/backend.h): activations and parameters in T = __half or
// __nv_bfloat16, float statistics and parameter gradients. Device pointers.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mpiasr {

// out [N, C] = (x - mean) rstd weight + bias per row of inp [N, C]; mean and
// rstd [N] saved (either may be null). weight / bias null mean 1 / 0.
template <typename T>
void cuda_layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                            const T* bias, int N, int C, float eps, cudaStream_t stream);

// x = base + scale Dropout_p(branch) (seed, offset), written; then out, mean,
// rstd as cuda_layernorm_forward of x.
template <typename T>
void cuda_residual_layernorm_forward(T* x, T* out, float* mean, float* rstd, const T* base,
                                     const T* branch, float scale, float p, const uint64_t* seed,
                                     uint64_t offset, const T* weight, const T* bias, int N, int C,
                                     float eps, cudaStream_t stream);

// normed = LayerNorm(inp) as cuda_layernorm_forward, out = swish(normed).
template <typename T>
void cuda_layernorm_swish_forward(T* normed, T* out, float* mean, float* rstd, const T* inp,
                                  const T* weight, const T* bias, int N, int C, float eps,
                                  cudaStream_t stream);

// dinp (+= when accumulate, else =) LayerNorm's input gradient; dweight, dbias
// [C] += their gradients (any of the three may be null). partials holds
// 2 column_chunks(N) C floats.
template <typename T>
void cuda_layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                             const T* weight, const float* mean, const float* rstd, int N, int C,
                             bool accumulate, float* partials, cudaStream_t stream);

// The same through the Swish of cuda_layernorm_swish_forward: dout is
// d loss / d swish(normed); dinp overwritten.
template <typename T>
void cuda_layernorm_swish_backward(T* dinp, float* dweight, float* dbias, const T* dout,
                                   const T* inp, const T* normed, const T* weight,
                                   const float* mean, const float* rstd, int N, int C,
                                   float* partials, cudaStream_t stream);

}  // namespace mpiasr
