// Launchers of the LayerNorm kernels (kernels/cuda/layernorm.cu): activations
// and parameters in T = __half or __nv_bfloat16, float statistics and
// parameter gradients.
#pragma once

#include <cuda_runtime.h>

namespace mpiasr {

// out [N, C] = (x - mean) rstd weight + bias per row of inp [N, C]; mean and
// rstd [N] saved (either may be null). weight / bias null mean 1 / 0.
template <typename T>
void cuda_layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                            const T* bias, int N, int C, float eps, cudaStream_t stream);

// dinp += LayerNorm's input gradient; dweight, dbias [C] += their gradients
// (any of the three may be null). partials holds 2 column_chunks(N) C floats.
template <typename T>
void cuda_layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                             const T* weight, const float* mean, const float* rstd, int N, int C,
                             float* partials, cudaStream_t stream);

}  // namespace mpiasr
