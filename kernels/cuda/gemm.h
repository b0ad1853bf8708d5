// 16-bit GEMM on cuBLASLt with fp32 accumulation and an optional epilogue
// (see gemm.cpp).
#pragma once

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string_view>
#include <tuple>

namespace mpiasr {

// What cuBLASLt does with the product before it is stored, in cuda_gemm's
// row-major terms (C [M, N], op(A) [M, K]), with `vector` its argument:
//   kNone         nothing
//   kRelu         C[m, n] = max(C[m, n], 0)
//   kBias         C[m, n] += vector[n]                  (vector [N], C's type)
//   kReluBias     C[m, n] = max(C[m, n] + vector[n], 0) (vector [N], C's type)
//   kRowSumsOfA   vector[m] = sum_k op(A)[m, k]          (vector [M], C's type,
//                 overwritten): the bias gradient, when op(A) is dout^T
enum class GemmEpilogue { kNone, kRelu, kBias, kReluBias, kRowSumsOfA };

// The GEMM call sites of kernels/cuda, each cuda_gemm call naming its own:
// in cuda_gemm's errors, in its plans' keys, and, in the emulation build, to
// the emulated heuristic (MPIASR_EMU_CUBLASLT_NO_ALGO, kernels/cuda_emu/cublas_lt.h).
inline constexpr std::string_view kGemmSites[] = {"linear.forward", "linear.dinp",
                                                  "linear.dweight", "conv2d.forward",
                                                  "conv2d.dweight", "conv2d.dinp"};

// Everything a GEMM's cuBLASLt descriptors and the heuristic's answer depend
// on: cuda_gemm's shape, types and epilogue, and the alignment (a power of
// two up to 256 bytes) of A, B, C and the vector's addresses; and its call
// site, so that each site has its own plan and its own heuristic answer (the
// emulated heuristic's may differ by site).
struct GemmShape {
  std::string_view site;
  bool trans_a = false, trans_b = false;
  int M = 0, N = 0, K = 0, lda = 0, ldb = 0, ldc = 0;
  cudaDataType_t ab_type = CUDA_R_16F, c_type = CUDA_R_16F;
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  uint32_t align_a = 0, align_b = 0, align_c = 0, align_vector = 0;

  auto tie() const {
    return std::tie(site, trans_a, trans_b, M, N, K, lda, ldb, ldc, ab_type, c_type, epilogue,
                    align_a, align_b, align_c, align_vector);
  }
  bool operator<(const GemmShape& other) const { return tie() < other.tie(); }
};

struct GemmPlan;  // gemm.cpp: the descriptors, the algorithm, or the fallback

// cuda_gemm's plans by shape, for one handle and workspace: made on a
// shape's first call, used by every later one (not thread-safe: one backend,
// one thread).
struct GemmPlans {
  GemmPlans();
  ~GemmPlans();
  GemmPlans(const GemmPlans&) = delete;
  GemmPlans& operator=(const GemmPlans&) = delete;

  std::map<GemmShape, std::unique_ptr<GemmPlan>> by_shape;
};

// Where cuda_gemm runs: a cuBLASLt handle, its workspace, the stream, and the
// plans made for them.
struct GemmContext {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cudaStream_t stream = nullptr;
  GemmPlans* plans = nullptr;
};

// C = epilogue(alpha op(A) op(B) + beta C), row-major like Backend::gemm:
// op(A) is M x K, op(B) K x N, C M x N. A and B are of ab_type (CUDA_R_16F or
// CUDA_R_16BF); C is of ab_type or float (CUDA_R_32F, for weight gradients
// accumulated with beta = 1). Where cuBLASLt has no algorithm for the
// epilogue, the plain GEMM and the epilogue in the project's kernels; where it
// has none for the plain GEMM either, the project's GEMM kernel
// (gemm_fallback.h). `site` is one of kGemmSites. Any other failure throws,
// naming the site and the call.
void cuda_gemm(const GemmContext& context, std::string_view site, bool trans_a, bool trans_b, int M,
               int N, int K, float alpha, const void* A, int lda, const void* B, int ldb,
               cudaDataType_t ab_type, float beta, void* C, cudaDataType_t c_type, int ldc,
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
