// cuda_gemm's product and epilogues in the project's own kernels
// (kernels/cuda/gemm_fallback.cu), for the calls cuBLASLt finds no algorithm
// for (gemm.cpp): all arguments as cuda_gemm's (gemm.h), row-major, A and B
// of ab_type (CUDA_R_16F or CUDA_R_16BF), C and the vector of c_type (ab_type
// or CUDA_R_32F), float accumulation and one rounding to C's type per kernel.
#pragma once

#include <cuda_runtime.h>

#include "kernels/cuda/gemm.h"

namespace mpiasr {

// C = epilogue(alpha op(A) op(B) + beta C), one thread per element of C (C is
// not read when beta is 0), then kRowSumsOfA's sums. The slow path: no tiles,
// no tensor cores.
void cuda_gemm_kernels(cudaStream_t stream, bool trans_a, bool trans_b, int M, int N, int K,
                       float alpha, const void* A, int lda, const void* B, int ldb,
                       cudaDataType_t ab_type, float beta, void* C, cudaDataType_t c_type, int ldc,
                       GemmEpilogue epilogue, void* vector);

// The epilogue alone, after a plain GEMM left the product in C:
//   kRelu, kBias, kReluBias   C[m, n] = max?(C[m, n] (+ vector[n]), 0), C read
//                             and rounded again (the fused epilogue rounds once)
//   kRowSumsOfA               vector[m] = sum_k op(A)[m, k]
void cuda_gemm_epilogue(cudaStream_t stream, bool trans_a, int M, int N, int K, const void* A,
                        int lda, cudaDataType_t ab_type, void* C, cudaDataType_t c_type, int ldc,
                        GemmEpilogue epilogue, void* vector);

}  // namespace mpiasr
