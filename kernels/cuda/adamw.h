// Launchers of the optimizer kernels (kernels/cuda/adamw.cu): fused AdamW on
// fp32 masters with their compute copy (T = __half or __nv_bfloat16), and the
// gradient checks before it.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/adamw_math.h"

namespace mpiasr {

// Blocks of the first reduction stage; partials hold this many doubles.
constexpr int kReductionBlocks = 1024;

// AdamW on w, m, v [n] from g [n] (kernels/adamw_math.h), then w_act = (T) w
// when w_act is not null.
template <typename T>
void cuda_adamw_step(float* w, T* w_act, const float* g, float* m, float* v, size_t n,
                     const AdamWCoefficients<float>& coefficients, cudaStream_t stream);

// *result (device) = sum of g[i]^2 in double, reduced in a fixed order.
void cuda_sum_squares(double* result, const float* g, size_t n, double* partials,
                      cudaStream_t stream);

// *flag (device) = 1 if any g[i] is NaN or infinite, else 0.
void cuda_has_nonfinite(int* flag, const float* g, size_t n, cudaStream_t stream);

}  // namespace mpiasr
