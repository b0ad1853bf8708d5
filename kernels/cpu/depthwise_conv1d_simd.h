// The loop of depthwise_conv1d.cpp, compiled once per instruction-set level
// (kernels/cpu/simd_levels.h): the tap sums of a block of rows, which the
// forward pass, the input gradient and the weight gradient all run.

// y[r, c] = start + sum_{k < n} a[k, c] xp[r + k, c] for rows r < R (an
// integral_constant, which MPIASR_SIMD_CALL deduces) and channels
// [c_begin, c_end), start = init[c], or y[r, c] itself where init is
// null. The output rows with a = the weight [K, C] (n = K taps), the weight
// gradient's taps with a = the output gradient (n = frames). A vector of
// channels at a time, its R sums in registers over k: per k one load of a
// and R of xp for R multiply-adds (one row at a time would also load and
// store its sum at every k, and wait on it).
template <typename T, int R>
void shifted_products(std::integral_constant<int, R>, T* y, const T* a, const T* xp, const T* init,
                      int n, int C, int c_begin, int c_end) {
  constexpr int kLanes = int(64 / sizeof(T));
  int c0 = c_begin;
  for (; c0 + kLanes <= c_end; c0 += kLanes) {
    T acc[R][kLanes];
    for (int r = 0; r < R; ++r)
      std::copy_n(init ? init + c0 : y + int64_t(r) * C + c0, kLanes, acc[r]);
    for (int k = 0; k < n; ++k) {
      const T* ak = a + int64_t(k) * C + c0;
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) {
        const T* x = xp + int64_t(r + k) * C + c0;
#pragma omp simd
        for (int l = 0; l < kLanes; ++l) acc[r][l] += ak[l] * x[l];
      }
    }
    for (int r = 0; r < R; ++r) std::copy_n(acc[r], kLanes, y + int64_t(r) * C + c0);
  }
  for (int c = c0; c < c_end; ++c) {
    for (int r = 0; r < R; ++r) {
      T sum = init ? init[c] : y[int64_t(r) * C + c];
      for (int k = 0; k < n; ++k) sum += a[int64_t(k) * C + c] * xp[int64_t(r + k) * C + c];
      y[int64_t(r) * C + c] = sum;
    }
  }
}
