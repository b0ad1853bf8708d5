// Linear layer as cuBLASLt GEMMs with the bias in their epilogues (see linear.h).
#include "kernels/cuda/linear.h"

#include "kernels/cuda/column_sums.h"

namespace mpiasr {

template <typename T>
void cuda_linear_forward(const GemmContext& gemm, T* out, const T* inp, const T* weight,
                         const T* bias, int M, int K, int N) {
  constexpr cudaDataType_t type = cuda_data_type<T>();
  // out [M, N] = inp [M, K] W^T (+ bias on every row)
  cuda_gemm(gemm, "linear.forward", false, true, M, N, K, 1.0f, inp, K, weight, K, type, 0.0f, out,
            type, N, bias ? GemmEpilogue::kBias : GemmEpilogue::kNone, const_cast<T*>(bias));
}

template <typename T>
void cuda_linear_backward(const GemmContext& gemm, T* dinp, float* dweight, float* dbias,
                          const T* dout, const T* inp, const T* weight, int M, int K, int N,
                          float* partials) {
  constexpr cudaDataType_t type = cuda_data_type<T>();
  // dinp [M, K] = dout [M, N] W [N, K]
  if (dinp)
    cuda_gemm(gemm, "linear.dinp", false, false, M, K, N, 1.0f, dout, N, weight, K, type, 0.0f,
              dinp, type, K);
  // dW [N, K] += dout^T [N, M] inp [M, K], accumulated in fp32; the row sums
  // of dout^T, dbias's increment, into partials [N] on the way.
  if (dweight) {
    cuda_gemm(gemm, "linear.dweight", true, false, N, K, M, 1.0f, dout, N, inp, K, type, 1.0f,
              dweight, CUDA_R_32F, K, dbias ? GemmEpilogue::kRowSumsOfA : GemmEpilogue::kNone,
              dbias ? partials : nullptr);
  }
  if (!dbias) return;
  if (dweight) {
    cuda_add_partials(dbias, partials, 1, N, gemm.stream);
  } else {
    cuda_add_column_sums(dbias, dout, M, N, partials, gemm.stream);
  }
}

#define MPIASR_INSTANTIATE(T)                                                                     \
  template void cuda_linear_forward<T>(const GemmContext&, T*, const T*, const T*, const T*, int, \
                                       int, int);                                                 \
  template void cuda_linear_backward<T>(const GemmContext&, T*, float*, float*, const T*,         \
                                        const T*, const T*, int, int, int, float*);
MPIASR_INSTANTIATE(__half)
MPIASR_INSTANTIATE(__nv_bfloat16)
#undef MPIASR_INSTANTIATE

}  // namespace mpiasr
