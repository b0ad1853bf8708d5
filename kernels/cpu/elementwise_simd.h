// The loops of elementwise.cpp, compiled once per instruction-set level
// (kernels/cpu/simd_levels.h): the cast and the scaled add.

template <typename To, typename From>
void cpu_cast(To* dst, const From* src, size_t n) {
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(n)))
  for (size_t i = 0; i < n; ++i) dst[i] = To(src[i]);
}

template <typename T>
void cpu_add_scaled(T* y, const T* x, const T* r, float alpha, size_t n) {
  const T a = T(alpha);
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(n)))
  for (size_t i = 0; i < n; ++i) y[i] = x[i] + a * r[i];
}
