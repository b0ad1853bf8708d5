// Launchers of the LayerNorm kernels (kernels/cuda/layernorm.cu): half
// activations, float statistics, parameters and parameter gradients.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace mpiasr {

// out [N, C] = (x - mean) rstd weight + bias per row of inp [N, C]; mean and
// rstd [N] saved (either may be null). weight / bias null mean 1 / 0.
void cuda_layernorm_forward(__half* out, float* mean, float* rstd, const __half* inp,
                            const __half* weight, const __half* bias, int N, int C, float eps,
                            cudaStream_t stream);

// dinp += LayerNorm's input gradient; dweight, dbias [C] += their gradients
// (any of the three may be null). partials holds 2 column_chunks(N) C floats.
void cuda_layernorm_backward(__half* dinp, float* dweight, float* dbias, const __half* dout,
                             const __half* inp, const __half* weight, const float* mean,
                             const float* rstd, int N, int C, float* partials, cudaStream_t stream);

}  // namespace mpiasr
