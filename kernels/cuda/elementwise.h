// Launchers of the elementwise CUDA kernels (kernels/cuda/elementwise.cu):
// casts, scaled adds and padding masks. Half values are computed in float,
// then rounded to half once. All pointers are device pointers.
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
}  // namespace mpiasr
