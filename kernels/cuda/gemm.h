// 16-bit GEMM on cuBLAS with fp32 accumulation (see gemm.cpp).
#pragma once

#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace mpiasr {

// C[b] = alpha op(A[b]) op(B[b]) + beta C[b] for b < batch, row-major like
// Backend::gemm: op(A) is M x K, op(B) K x N, C[b] M x N. A and B are of
// ab_type (CUDA_R_16F or CUDA_R_16BF); C is of ab_type or float (CUDA_R_32F,
// for weight gradients accumulated with beta = 1). Runs on the handle's stream.
void cuda_gemm(cublasHandle_t handle, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
               const void* A, int lda, int64_t stride_a, const void* B, int ldb, int64_t stride_b,
               cudaDataType_t ab_type, float beta, void* C, cudaDataType_t c_type, int ldc,
               int64_t stride_c, int batch);

// The cuBLAS data type of a storage type.
template <typename T>
constexpr cudaDataType_t cuda_data_type();
template <>
constexpr cudaDataType_t cuda_data_type<__half>() {
  return CUDA_R_16F;
}
template <>
constexpr cudaDataType_t cuda_data_type<__nv_bfloat16>() {
  return CUDA_R_16BF;
}
template <>
constexpr cudaDataType_t cuda_data_type<float>() {
  return CUDA_R_32F;
}

}  // namespace mpiasr
