// The loops of adamw.cpp, compiled once per instruction-set level
// (kernels/cpu/simd_levels.h): the AdamW update and a block's sum of squares.
// adamw.cpp is built without FMA contraction (CMakeLists.txt), so every level
// gives the same bits.

template <typename Real>
void cpu_adamw_step(Real* w, Real* w_act, const Real* g, Real* m, Real* v, size_t n,
                    const AdamWCoefficients<Real>& c) {
  const bool copy = w_act && w_act != w;
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(n)))
  for (size_t i = 0; i < n; ++i) {
    adamw_update(w[i], m[i], v[i], g[i], c);
    if (copy) w_act[i] = w[i];
  }
}

// Squares of g[0, n) (n <= kSumBlock) in kSumLanes lanes, lane j taking
// elements j, j + kSumLanes, ..., then the lanes added pairwise.
template <typename Real>
double block_sum_squares(const Real* g, size_t n) {
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
