// AdamW and the sum of squares on the CPU, parallel over elements (OpenMP).
#include "kernels/cpu/adamw.h"

#include <algorithm>
#include <cmath>
#include <vector>

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

namespace {

// Squares of g[0, n) (n <= kSumBlock) in kSumLanes lanes, lane j taking
// elements j, j + kSumLanes, ..., then the lanes added pairwise.
template <typename Real>
MPIASR_SIMD_CLONES double block_sum_squares(const Real* g, size_t n) {
  double lane[kSumLanes] = {};
  size_t i = 0;
  for (; i + kSumLanes <= n; i += kSumLanes) {
    for (size_t j = 0; j < kSumLanes; ++j) lane[j] += double(g[i + j]) * double(g[i + j]);
  }
  for (; i < n; ++i) lane[i % kSumLanes] += double(g[i]) * double(g[i]);
  for (size_t width = kSumLanes / 2; width > 0; width /= 2) {
    for (size_t j = 0; j < width; ++j) lane[j] += lane[j + width];
  }
  return lane[0];
}

}  // namespace

template <typename Real>
double cpu_sum_squares(const Real* g, size_t n) {
  const size_t blocks = (n + kSumBlock - 1) / kSumBlock;
  std::vector<double> block_sums(blocks);
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(n)))
  for (size_t b = 0; b < blocks; ++b) {
    const size_t begin = b * kSumBlock;
    block_sums[b] = block_sum_squares(g + begin, std::min(kSumBlock, n - begin));
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
