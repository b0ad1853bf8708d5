// Row-major GEMM on column-major cuBLASLt. A row-major matrix with leading
// dimension ld is, read column-major, its transpose; so the row-major product
//   C = op(A) op(B)            (M x N)
// is computed as the column-major product
//   C^T = op(B)^T op(A)^T      (N x M)
// by passing B before A with the same transpose flags and swapping M and N.
// The epilogues follow: a bias over C's row-major columns is one over C^T's
// rows (CUBLASLT_EPILOGUE_BIAS, RELU_BIAS; RELU is elementwise), and row
// sums of op(A) are column sums of the second column-major operand, op(A)^T,
// over the GEMM's k (CUBLASLT_EPILOGUE_BGRADB).
// Inputs CUDA_R_16F or CUDA_R_16BF, output theirs or CUDA_R_32F,
// CUBLAS_COMPUTE_32F with fp32 scales (fp32 accumulation on tensor cores).
// Each call describes its product (matmul and layout descriptors, owned by
// LtDescriptors) and asks the heuristic for the best algorithm within the
// workspace; cuBLASLt caches the heuristic's answers. A dry pass of a step
// graph (step_graph.h) asks the heuristic, whose answer the caller acts on,
// and signs the matmul instead of queueing it.
#include "kernels/cuda/gemm.h"

#include "kernels/cuda/call_counts.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/step_graph.h"
#include "kernels/gemm_check.h"

namespace mpiasr {

namespace {

// The descriptors of one matmul, destroyed with it.
struct LtDescriptors {
  cublasLtMatmulDesc_t matmul = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;

  LtDescriptors() = default;
  LtDescriptors(const LtDescriptors&) = delete;
  LtDescriptors& operator=(const LtDescriptors&) = delete;
  ~LtDescriptors() {
    if (preference) (void)cublasLtMatmulPreferenceDestroy(preference);
    for (cublasLtMatrixLayout_t layout : {a, b, c}) {
      if (layout) (void)cublasLtMatrixLayoutDestroy(layout);
    }
    if (matmul) (void)cublasLtMatmulDescDestroy(matmul);
  }
};

cublasLtEpilogue_t lt_epilogue(GemmEpilogue epilogue) {
  switch (epilogue) {
    case GemmEpilogue::kNone:
      return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::kRelu:
      return CUBLASLT_EPILOGUE_RELU;
    case GemmEpilogue::kBias:
      return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::kReluBias:
      return CUBLASLT_EPILOGUE_RELU_BIAS;
    case GemmEpilogue::kRowSumsOfA:
      return CUBLASLT_EPILOGUE_BGRADB;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

}  // namespace

bool cuda_gemm(const GemmContext& context, bool trans_a, bool trans_b, int M, int N, int K,
               float alpha, const void* A, int lda, const void* B, int ldb, cudaDataType_t ab_type,
               float beta, void* C, cudaDataType_t c_type, int ldc, GemmEpilogue epilogue,
               void* vector) {
  if (M <= 0 || N <= 0) return true;
  check_gemm_arguments(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  MPIASR_CHECK(ab_type == CUDA_R_16F || ab_type == CUDA_R_16BF, "gemm input type " << int(ab_type));
  MPIASR_CHECK(c_type == ab_type || c_type == CUDA_R_32F, "gemm output type " << int(c_type));
  const bool takes_vector = epilogue != GemmEpilogue::kNone && epilogue != GemmEpilogue::kRelu;
  MPIASR_CHECK(takes_vector == (vector != nullptr),
               "gemm epilogue " << int(epilogue) << " with vector " << vector);
  const cublasOperation_t op_a = trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  LtDescriptors d;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&d.matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Column-major: the first operand is B, the second A.
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(d.matmul, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b)));
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(d.matmul, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof(op_a)));
  const cublasLtEpilogue_t lt = lt_epilogue(epilogue);
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(d.matmul, CUBLASLT_MATMUL_DESC_EPILOGUE, &lt, sizeof(lt)));
  if (vector) {
    CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(d.matmul, CUBLASLT_MATMUL_DESC_BIAS_POINTER,
                                                &vector, sizeof(vector)));
  }
  // B is stored K x N (N x K transposed) row-major, so N x K (K x N) column-major.
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.a, ab_type, trans_b ? K : N, trans_b ? N : K, ldb));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.b, ab_type, trans_a ? M : K, trans_a ? K : M, lda));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.c, c_type, N, M, ldc));
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&d.preference));
  const uint64_t workspace_bytes = context.workspace_bytes;
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(d.preference,
                                                    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace_bytes, sizeof(workspace_bytes)));
  cublasLtMatmulHeuristicResult_t best{};
  int found = 0;
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
      context.handle, d.matmul, d.a, d.b, d.c, d.c, d.preference, 1, &best, &found);
  if (status != CUBLAS_STATUS_SUCCESS || found == 0) {
    if (epilogue == GemmEpilogue::kRowSumsOfA) return false;
    MPIASR_FAIL(ExitCode::kFailure, "cuBLASLt has no algorithm for a GEMM of M "
                                        << M << ", N " << N << ", K " << K << ", input type "
                                        << int(ab_type) << ", output type " << int(c_type)
                                        << ", epilogue " << int(lt) << ": "
                                        << cublasLtGetStatusName(status));
  }
  if (!cuda_detail::sign_work("cublasLtMatmul", trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb,
                              ab_type, beta, C, c_type, ldc, epilogue, vector, context.workspace,
                              context.stream)) {
    return true;
  }
  cuda_detail::count_queued_launch();
  CUBLAS_CHECK(cublasLtMatmul(context.handle, d.matmul, &alpha, B, d.a, A, d.b, &beta, C, d.c, C,
                              d.c, &best.algo, context.workspace, context.workspace_bytes,
                              context.stream));
  return true;
}

}  // namespace mpiasr
