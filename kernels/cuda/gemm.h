// Half-precision GEMM on cuBLAS with fp32 accumulation (see gemm.cpp).
#pragma once

#include <cublas_v2.h>
#include <cuda_fp16.h>

#include <cstdint>

namespace mpiasr {

// C[b] = alpha op(A[b]) op(B[b]) + beta C[b] for b < batch, row-major like
// Backend::gemm: op(A) is M x K, op(B) K x N, C[b] M x N. A and B are half;
// C is half (c_type CUDA_R_16F) or float (CUDA_R_32F, for weight gradients
// accumulated with beta = 1). Runs on the handle's stream.
void cuda_gemm(cublasHandle_t handle, bool trans_a, bool trans_b, int M, int N, int K, float alpha,
               const __half* A, int lda, int64_t stride_a, const __half* B, int ldb,
               int64_t stride_b, float beta, void* C, cudaDataType_t c_type, int ldc,
               int64_t stride_c, int batch);

}  // namespace mpiasr
