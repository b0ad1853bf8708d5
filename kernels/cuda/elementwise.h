// Launchers of the elementwise CUDA kernels (kernels/cuda/elementwise.cu):
// casts and padding masks, over T = __half or __nv_bfloat16.
// 16-bit values are computed in float, then rounded to T once. All pointers
// are device pointers.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mpiasr {

// dst[i] = src[i], rounded to nearest even when Dst is narrower (one of Dst,
// Src is float, the other the activation type).
template <typename Dst, typename Src>
void cuda_cast(Dst* dst, const Src* src, size_t n, cudaStream_t stream);
// x [B, T, C]: rows t >= lengths[b] set to zero (lengths on the device)
template <typename T>
void cuda_mask_padding(T* x, const int32_t* lengths, int B, int T_, int C, cudaStream_t stream);

}  // namespace mpiasr
