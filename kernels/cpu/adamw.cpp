// AdamW and the sum of squares on the CPU, parallel over elements (OpenMP).
#include "kernels/cpu/adamw.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "src/base/error.h"

#define MPIASR_SIMD_SOURCE "kernels/cpu/adamw_simd.h"
#include "kernels/cpu/simd_levels.h"

namespace mpiasr {

template <typename Real>
void cpu_adamw_step(Real* w, Real* w_act, const Real* g, Real* m, Real* v, size_t n,
                    const AdamWCoefficients<Real>& c) {
  MPIASR_SIMD_CALL(cpu_adamw_step, w, w_act, g, m, v, n, c);
}

template <typename Real>
double cpu_sum_squares(const Real* g, size_t n) {
  const size_t blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<double> block_sums(blocks);
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(n)))
  for (size_t b = 0; b < blocks; ++b) {
    const size_t begin = b * kSumBlock;
    block_sums[b] = MPIASR_SIMD_CALL(block_sum_squares, g + begin, std::min(kSumBlock, n - begin));
  }
  double sum = 0.0;
  for (const double block_sum : block_sums) sum += block_sum;
  return sum;
}

template void cpu_adamw_step<float>(float*, float*, const float*, float*, float*, size_t,
                                    const AdamWCoefficients<float>&);
template void cpu_adamw_step<double>(double*, double*, const double*, double*, double*, size_t,
                                     const AdamWCoefficients<double>&);
template double cpu_sum_squares<float>(const float*, size_t);
template double cpu_sum_squares<double>(const double*, size_t);

}  // namespace mpiasr
