// 16-bit GEMM on cuBLASLt with fp32 accumulation and an optional epilogue
// (see gemm.cpp).
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

namespace mpiasr {

// Where cuda_gemm runs: a cuBLASLt handle, its workspace and the stream.
struct GemmContext {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
};

// What cuBLASLt does with the product before it is stored, in cuda_gemm's
// row-major terms (C [M, N], op(A) [M, K]), with `vector` its argument:
//   kNone         nothing
//   kRelu         C[m, n] = max(C[m, n], 0)
//   kBias         C[m, n] += vector[n]                  (vector [N], C's type)
//   kReluBias     C[m, n] = max(C[m, n] + vector[n], 0) (vector [N], C's type)
//   kRowSumsOfA   vector[m] = sum_k op(A)[m, k]          (vector [M], C's type,
//                 overwritten): the bias gradient, when op(A) is dout^T
enum class GemmEpilogue { kNone, kRelu, kBias, kReluBias, kRowSumsOfA };

// C = epilogue(alpha op(A) op(B) + beta C), row-major like Backend::gemm:
// op(A) is M x K, op(B) K x N, C M x N. A and B are of ab_type (CUDA_R_16F or
// CUDA_R_16BF); C is of ab_type or float (CUDA_R_32F, for weight gradients
// accumulated with beta = 1). Returns false, having done nothing, only when
// cuBLASLt has no algorithm for kRowSumsOfA with these types (the caller then
// sums the rows itself); any other failure throws, naming the call.
bool cuda_gemm(const GemmContext& context, bool trans_a, bool trans_b, int M, int N, int K,
               float alpha, const void* A, int lda, const void* B, int ldb, cudaDataType_t ab_type,
               float beta, void* C, cudaDataType_t c_type, int ldc,
               GemmEpilogue epilogue = GemmEpilogue::kNone, void* vector = nullptr);

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
