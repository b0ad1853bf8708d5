// Row-major GEMM on column-major cuBLAS. A row-major matrix with leading
// dimension ld is, read column-major, its transpose; so the row-major product
//   C = op(A) op(B)            (M x N)
// is computed as the column-major product
//   C^T = op(B)^T op(A)^T      (N x M)
// by passing B before A with the same transpose flags and swapping M and N.
// Inputs CUDA_R_16F or CUDA_R_16BF, output theirs or CUDA_R_32F, CUBLAS_COMPUTE_32F
// (fp32 accumulation on tensor cores); cublasGemmEx for one matrix,
// cublasGemmStridedBatchedEx for a batch.
#include "kernels/cuda/gemm.h"

#include <algorithm>

#include "kernels/cuda/call_counts.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/gemm_check.h"

namespace mpiasr {

void cuda_gemm(cublasHandle_t handle, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
               const void* A, int lda, int64_t stride_a, const void* B, int ldb, int64_t stride_b,
               cudaDataType_t ab_type, float beta, void* C, cudaDataType_t c_type, int ldc,
               int64_t stride_c, int batch) {
  if (M <= 0 || N <= 0 || batch <= 0) return;
  check_gemm_arguments(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  MPIASR_CHECK(ab_type == CUDA_R_16F || ab_type == CUDA_R_16BF, "gemm input type " << int(ab_type));
  MPIASR_CHECK(c_type == ab_type || c_type == CUDA_R_32F, "gemm output type " << int(c_type));
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  cuda_detail::count_launch();
  if (batch == 1) {
    CUBLAS_CHECK(cublasGemmEx(handle, op_b, op_a, N, M, K, &alpha, B, ab_type, ldb, A, ab_type, lda,
                              &beta, C, c_type, ldc, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    return;
  }
  CUBLAS_CHECK(cublasGemmStridedBatchedEx(
      handle, op_b, op_a, N, M, K, &alpha, B, ab_type, ldb, stride_b, A, ab_type, lda, stride_a,
      &beta, C, c_type, ldc, stride_c, batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
}

}  // namespace mpiasr
