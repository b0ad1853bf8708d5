// The loop of linear.cpp, compiled once per instruction-set level
// (kernels/cpu/simd_levels.h): the column sums of the bias gradient.

template <typename T>
void cpu_add_column_sums(T* sums, const T* x, int64_t M, int N) {
  // Each thread owns a contiguous range of columns and walks all rows, so the
  // sum order (and the result) does not depend on the thread count.
#pragma omp parallel if (parallel_worth(M * N))
  {
    const auto [begin, end] = thread_columns<T>(N);
    // Four rows at a time: each sum is loaded and stored once per four rows.
    int64_t m = 0;
    for (; m + 4 <= M; m += 4) {
      const T *r0 = x + m * N, *r1 = r0 + N, *r2 = r1 + N, *r3 = r2 + N;
      for (int n = begin; n < end; ++n) sums[n] += r0[n] + r1[n] + r2[n] + r3[n];
    }
    for (; m < M; ++m) {
      const T* row = x + m * N;
      for (int n = begin; n < end; ++n) sums[n] += row[n];
    }
  }
}
