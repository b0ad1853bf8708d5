// Linear layer as GEMMs with the bias folded in (see linear.h).
#include "kernels/cpu/linear.h"

#include <cstring>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/parallel.h"

#define MPIASR_SIMD_SOURCE "kernels/cpu/linear_simd.h"
#include "kernels/cpu/simd_levels.h"

namespace mpiasr {

template <typename T>
void cpu_linear_forward(T* out, const T* inp, const T* weight, const T* bias, int M, int K, int N) {
  T beta = T(0);
  if (bias) {
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(M) * N))
    for (int m = 0; m < M; ++m) std::memcpy(out + int64_t(m) * N, bias, sizeof(T) * N);
    beta = T(1);
  }
  // out [M, N] = inp [M, K] W^T + beta out
  cpu_gemm<T>(false, true, M, N, K, T(1), inp, K, 0, weight, K, 0, beta, out, N, 0, 1);
}

template <typename T>
void cpu_linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                         const T* weight, int M, int K, int N) {
  // dinp [M, K] = dout [M, N] W [N, K]
  if (dinp) cpu_gemm<T>(false, false, M, K, N, T(1), dout, N, 0, weight, K, 0, T(0), dinp, K, 0, 1);
  // dW [N, K] += dout^T [N, M] inp [M, K]
  if (dweight) {
    cpu_gemm<T>(true, false, N, K, M, T(1), dout, N, 0, inp, K, 0, T(1), dweight, K, 0, 1);
  }
  if (dbias) cpu_add_column_sums(dbias, dout, M, N);
}

template <typename T>
void cpu_add_column_sums(T* sums, const T* x, int64_t M, int N) {
  MPIASR_SIMD_CALL(cpu_add_column_sums, sums, x, M, N);
}

template void cpu_linear_forward<float>(float*, const float*, const float*, const float*, int, int,
                                        int);
template void cpu_linear_forward<double>(double*, const double*, const double*, const double*, int,
                                         int, int);
template void cpu_linear_backward<float>(float*, float*, float*, const float*, const float*,
                                         const float*, int, int, int);
template void cpu_linear_backward<double>(double*, double*, double*, const double*, const double*,
                                          const double*, int, int, int);
template void cpu_add_column_sums<float>(float*, const float*, int64_t, int);
template void cpu_add_column_sums<double>(double*, const double*, int64_t, int);

}  // namespace mpiasr
