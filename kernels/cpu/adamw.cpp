// AdamW, sum of squares and the non-finite check on the CPU, parallel over
// elements (OpenMP).
#include "kernels/cpu/adamw.h"

#include <cmath>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"
#include "src/base/error.h"

namespace mpiasr {

template <typename Real>
MPIASR_SIMD_CLONES void cpu_adamw_step(Real* w, Real* w_act, const Real* g, Real* m, Real* v,
                                       size_t n, const AdamWCoefficients<Real>& c) {
  const bool copy = w_act && w_act != w;
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(n)))
  for (size_t i = 0; i < n; ++i) {
    adamw_update(w[i], m[i], v[i], g[i], c);
    if (copy) w_act[i] = w[i];
  }
}

template <typename Real>
double cpu_sum_squares(const Real* g, size_t n) {
  double sum = 0.0;
#pragma omp parallel for schedule(static) reduction(+ : sum) if (parallel_worth(int64_t(n)))
  for (size_t i = 0; i < n; ++i) sum += double(g[i]) * double(g[i]);
  return sum;
}

template void cpu_adamw_step<float>(float*, float*, const float*, float*, float*, size_t,
                                    const AdamWCoefficients<float>&);
template void cpu_adamw_step<double>(double*, double*, const double*, double*, double*, size_t,
                                     const AdamWCoefficients<double>&);
template double cpu_sum_squares<float>(const float*, size_t);
template double cpu_sum_squares<double>(const double*, size_t);

}  // namespace mpiasr
