// The loops of activations.cpp, compiled once per instruction-set level
// (kernels/cpu/simd_levels.h): ReLU, Swish and GLU, forward and backward.

template <typename T>
void cpu_relu_forward(T* out, const T* inp, size_t n) {
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(n)))
  for (size_t i = 0; i < n; ++i) out[i] = relu(inp[i]);
}

template <typename T>
void cpu_relu_backward(T* dinp, const T* dout, const T* inp, size_t n) {
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(n)))
  for (size_t i = 0; i < n; ++i) dinp[i] = relu_grad(inp[i], dout[i]);
}

template <typename T>
void cpu_swish_forward(T* out, const T* inp, size_t n) {
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(n)))
  for (size_t i = 0; i < n; ++i) out[i] = swish(inp[i]);
}

template <typename T>
void cpu_swish_backward(T* dinp, const T* dout, const T* inp, size_t n) {
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(n)))
  for (size_t i = 0; i < n; ++i) dinp[i] = swish_grad(inp[i], dout[i]);
}

template <typename T>
void cpu_glu_forward(T* out, const T* inp, int N, int C) {
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(N) * C))
  for (int n = 0; n < N; ++n) {
    const T* a = inp + int64_t(n) * 2 * C;
    const T* b = a + C;
    T* y = out + int64_t(n) * C;
    for (int c = 0; c < C; ++c) y[c] = glu(a[c], b[c]);
  }
}

template <typename T>
void cpu_glu_backward(T* dinp, const T* dout, const T* inp, int N, int C) {
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(N) * C))
  for (int n = 0; n < N; ++n) {
    const T* a = inp + int64_t(n) * 2 * C;
    const T* b = a + C;
    const T* dy = dout + int64_t(n) * C;
    T* da = dinp + int64_t(n) * 2 * C;
    T* db = da + C;
    for (int c = 0; c < C; ++c) glu_grad(a[c], b[c], dy[c], &da[c], &db[c]);
  }
}
