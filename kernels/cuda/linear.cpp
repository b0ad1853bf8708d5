// Linear layer as cuBLAS GEMMs with the bias folded in (see linear.h).
#include "kernels/cuda/linear.h"

#include "kernels/cuda/column_sums.h"
#include "kernels/cuda/gemm.h"

namespace mpiasr {

template <typename T>
void cuda_linear_forward(cublasHandle_t handle, cudaStream_t stream, T* out, const T* inp,
                         const T* weight, const T* bias, int M, int K, int N) {
  constexpr cudaDataType_t type = cuda_data_type<T>();
  if (bias) cuda_broadcast_rows(out, bias, M, N, stream);
  // out [M, N] = inp [M, K] W^T + (bias ? out : 0)
  cuda_gemm(handle, false, true, M, N, K, 1.0f, inp, K, 0, weight, K, 0, type, bias ? 1.0f : 0.0f,
            out, type, N, 0, 1);
}

template <typename T>
void cuda_linear_backward(cublasHandle_t handle, cudaStream_t stream, T* dinp, float* dweight,
                          float* dbias, const T* dout, const T* inp, const T* weight, int M, int K,
                          int N, float* partials) {
  constexpr cudaDataType_t type = cuda_data_type<T>();
  // dinp [M, K] = dout [M, N] W [N, K]
  if (dinp) {
    cuda_gemm(handle, false, false, M, K, N, 1.0f, dout, N, 0, weight, K, 0, type, 0.0f, dinp, type,
              K, 0, 1);
  }
  // dW [N, K] += dout^T [N, M] inp [M, K], accumulated in fp32
  if (dweight) {
    cuda_gemm(handle, true, false, N, K, M, 1.0f, dout, N, 0, inp, K, 0, type, 1.0f, dweight,
              CUDA_R_32F, K, 0, 1);
  }
  if (dbias) cuda_add_column_sums(dbias, dout, M, N, partials, stream);
}

#define MPIASR_INSTANTIATE(T)                                                                \
  template void cuda_linear_forward<T>(cublasHandle_t, cudaStream_t, T*, const T*, const T*, \
                                       const T*, int, int, int);                             \
  template void cuda_linear_backward<T>(cublasHandle_t, cudaStream_t, T*, float*, float*,    \
                                        const T*, const T*, const T*, int, int, int, float*);
MPIASR_INSTANTIATE(__half)
MPIASR_INSTANTIATE(__nv_bfloat16)
#undef MPIASR_INSTANTIATE

}  // namespace mpiasr
