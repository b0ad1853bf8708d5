// The loop of log_softmax.cpp, compiled once per instruction-set level
// (kernels/cpu/simd_levels.h).

template <typename T>
void cpu_log_softmax_forward(T* logprobs, const T* logits, int N, int V) {
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(N) * V))
  for (int n = 0; n < N; ++n) {
    const T* x = logits + int64_t(n) * V;
    T* y = logprobs + int64_t(n) * V;
    T max = x[0];
#pragma omp simd reduction(max : max)
    for (int v = 1; v < V; ++v) max = max > x[v] ? max : x[v];
    T sum = T(0);
#pragma omp simd reduction(+ : sum)
    for (int v = 0; v < V; ++v) sum += branchless_exp(x[v] - max);
    const T log_norm = max + std::log(sum);
    for (int v = 0; v < V; ++v) y[v] = x[v] - log_norm;
  }
}
