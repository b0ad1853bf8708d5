// Casts, scaled adds and padding masks (see elementwise.h).
#include "kernels/cpu/elementwise.h"

#include <algorithm>

#include "kernels/cpu/parallel.h"
#include "src/base/error.h"

#define MPIASR_SIMD_SOURCE "kernels/cpu/elementwise_simd.h"
#include "kernels/cpu/simd_levels.h"

namespace mpiasr {

template <typename To, typename From>
void cpu_cast(To* dst, const From* src, size_t n) {
  MPIASR_SIMD_CALL(cpu_cast, dst, src, n);
}

template <typename T>
void cpu_add_scaled(T* y, const T* x, const T* r, float alpha, size_t n) {
  MPIASR_SIMD_CALL(cpu_add_scaled, y, x, r, alpha, n);
}

template <typename T>
void cpu_mask_padding(T* x, const int32_t* lengths, int B, int T_, int C) {
  for (int b = 0; b < B; ++b) {
    MPIASR_CHECK(lengths[b] >= 0 && lengths[b] <= T_, "length " << lengths[b] << " of utterance "
                                                                << b << " is outside [0, " << T_
                                                                << "]");
    T* first = x + (int64_t(b) * T_ + lengths[b]) * C;
    T* last = x + int64_t(b + 1) * T_ * C;
    std::fill(first, last, T(0));
  }
}

template void cpu_cast<float, float>(float*, const float*, size_t);
template void cpu_cast<float, double>(float*, const double*, size_t);
template void cpu_cast<double, float>(double*, const float*, size_t);
template void cpu_cast<double, double>(double*, const double*, size_t);
template void cpu_add_scaled<float>(float*, const float*, const float*, float, size_t);
template void cpu_add_scaled<double>(double*, const double*, const double*, float, size_t);
template void cpu_mask_padding<float>(float*, const int32_t*, int, int, int);
template void cpu_mask_padding<double>(double*, const int32_t*, int, int, int);

}  // namespace mpiasr
