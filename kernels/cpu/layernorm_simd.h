// The loops of layernorm.cpp, compiled once per instruction-set level
// (kernels/cpu/simd_levels.h): LayerNorm forward and its fused backward.

template <typename T>
void cpu_layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias,
                           int N, int C, float eps) {
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(N) * C))
  for (int n = 0; n < N; ++n) {
    const T* x = inp + int64_t(n) * C;
    T* y = out + int64_t(n) * C;
    T sum = T(0);
#pragma omp simd reduction(+ : sum)
    for (int c = 0; c < C; ++c) sum += x[c];
    const T m = sum / T(C);
    T sum_sq = T(0);
#pragma omp simd reduction(+ : sum_sq)
    for (int c = 0; c < C; ++c) sum_sq += (x[c] - m) * (x[c] - m);
    const T r = T(1) / std::sqrt(sum_sq / T(C) + T(eps));
    for (int c = 0; c < C; ++c) {
      const T xhat = (x[c] - m) * r;
      y[c] = xhat * (weight ? weight[c] : T(1)) + (bias ? bias[c] : T(0));
    }
    if (mean) mean[n] = m;
    if (rstd) rstd[n] = r;
  }
}

// Rows per chunk of the fused backward pass: each chunk sums its rows'
// parameter gradients in row order, and the chunks' sums are added in chunk
// order, so the result does not depend on the thread count.
constexpr int kRowsPerChunk = 32;

template <typename T>
void cpu_layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                            const T* weight, const T* mean, const T* rstd, int N, int C,
                            bool accumulate) {
  // One pass over the rows: a row's parameter gradients are taken from dout
  // before its dinp is written (dinp may alias dout), while the row is in
  // cache; dinp or the parameter gradients may be null.
  const bool params = dweight || dbias;
  const int chunks = (N + kRowsPerChunk - 1) / kRowsPerChunk;
  std::vector<T> chunk_sums(params ? size_t(chunks) * 2 * C : 0, T(0));  // per chunk: dw, db
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(N) * C))
  for (int chunk = 0; chunk < chunks; ++chunk) {
    T* dw = params ? chunk_sums.data() + size_t(chunk) * 2 * C : nullptr;
    T* db = params ? dw + C : nullptr;
    for (int n = chunk * kRowsPerChunk; n < std::min(N, (chunk + 1) * kRowsPerChunk); ++n) {
      const T* x = inp + int64_t(n) * C;
      const T* dy = dout + int64_t(n) * C;
      const T m = mean[n], r = rstd[n];
      if (params) {
        for (int c = 0; c < C; ++c) {
          dw[c] += dy[c] * (x[c] - m) * r;
          db[c] += dy[c];
        }
      }
      if (!dinp) continue;
      T* dx = dinp + int64_t(n) * C;
      T sum_g = T(0), sum_g_xhat = T(0);
#pragma omp simd reduction(+ : sum_g, sum_g_xhat)
      for (int c = 0; c < C; ++c) {
        const T g = dy[c] * (weight ? weight[c] : T(1));
        sum_g += g;
        sum_g_xhat += g * (x[c] - m) * r;
      }
      const T mean_g = sum_g / T(C), mean_g_xhat = sum_g_xhat / T(C);
      for (int c = 0; c < C; ++c) {
        const T g = dy[c] * (weight ? weight[c] : T(1));
        const T xhat = (x[c] - m) * r;
        dx[c] = (accumulate ? dx[c] : T(0)) + r * (g - mean_g - xhat * mean_g_xhat);
      }
    }
  }
  for (int chunk = 0; chunk < chunks && params; ++chunk) {
    const T* dw = chunk_sums.data() + size_t(chunk) * 2 * C;
    const T* db = dw + C;
    for (int c = 0; c < C; ++c) {
      if (dweight) dweight[c] += dw[c];
      if (dbias) dbias[c] += db[c];
    }
  }
}
