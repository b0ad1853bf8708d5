// Elementwise operations on the CPU over n values, split over the OpenMP team:
//   cast:               dst[i] = (To) src[i]
//   add_scaled:         y[i] = x[i] + alpha r[i]          (y may alias x or r)
//   mask_padding:       x[b, t, :] = 0 for t >= lengths[b], x [B, T, C]
#pragma once

#include <cstddef>
#include <cstdint>

namespace mpiasr {

template <typename To, typename From>
void cpu_cast(To* dst, const From* src, size_t n);

template <typename T>
void cpu_add_scaled(T* y, const T* x, const T* r, float alpha, size_t n);

template <typename T>
void cpu_mask_padding(T* x, const int32_t* lengths, int B, int T_, int C);

}  // namespace mpiasr
