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
//
// Plans. The first call of a shape (GemmShape: everything the descriptors
// and the heuristic depend on) describes the product (matmul and layout
// descriptors, and a preference that gives the heuristic the workspace and
// the operands' real alignment, which it would otherwise assume to be 256
// bytes) and asks the heuristic for the best algorithm; the plan keeps them,
// and every later call of the shape only sets the bias pointer and queues
// the matmul. Where the heuristic finds none with the epilogue, the plan asks
// for the plain GEMM and runs the epilogue in the project's kernels; where it
// finds none at all, the project's GEMM kernel (gemm_fallback.h). An H200
// found algorithms for every GEMM of the tests, training and benchmarks of
// `medium` and `large`: the fallbacks are for other GPUs and shapes. A dry
// pass of a step graph (step_graph.h) makes the plan and signs the work
// instead of queueing it. Each call site (kGemmSites) has its own plans, and
// errors name it; in the emulation build the emulated heuristic learns the
// site before each query (its answer may depend on it:
// MPIASR_EMU_CUBLASLT_NO_ALGO, kernels/cuda_emu/cublas_lt.h).
#include "kernels/cuda/gemm.h"

#include <algorithm>
#include <string>

#include "kernels/cuda/call_counts.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm_fallback.h"
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

// The largest power of two, up to 256, that divides the address.
uint32_t alignment_of(const void* p) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  return address == 0 ? 256u : uint32_t(std::min<uintptr_t>(256, address & (~address + 1)));
}

void set_epilogue(cublasLtMatmulDesc_t matmul, GemmEpilogue epilogue) {
  const cublasLtEpilogue_t lt = lt_epilogue(epilogue);
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(matmul, CUBLASLT_MATMUL_DESC_EPILOGUE, &lt, sizeof(lt)));
}

void set_vector(cublasLtMatmulDesc_t matmul, void* vector) {
  CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(matmul, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &vector,
                                              sizeof(vector)));
}

// Describes the product of `s` (vector: the call's, for its alignment).
void describe(LtDescriptors& d, const GemmShape& s, void* vector, uint64_t workspace_bytes) {
  const int M = s.M, N = s.N, K = s.K;
  const cublasOperation_t op_a = s.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
  const cublasOperation_t op_b = s.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  CUBLAS_CHECK(cublasLtMatmulDescCreate(&d.matmul, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  // Column-major: the first operand is B, the second A.
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(d.matmul, CUBLASLT_MATMUL_DESC_TRANSA, &op_b, sizeof(op_b)));
  CUBLAS_CHECK(
      cublasLtMatmulDescSetAttribute(d.matmul, CUBLASLT_MATMUL_DESC_TRANSB, &op_a, sizeof(op_a)));
  set_epilogue(d.matmul, s.epilogue);
  if (vector) set_vector(d.matmul, vector);
  // B is stored K x N (N x K transposed) row-major, so N x K (K x N) column-major.
  CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&d.a, s.ab_type, s.trans_b ? K : N, s.trans_b ? N : K, s.ldb));
  CUBLAS_CHECK(
      cublasLtMatrixLayoutCreate(&d.b, s.ab_type, s.trans_a ? M : K, s.trans_a ? K : M, s.lda));
  CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&d.c, s.c_type, N, M, s.ldc));
  CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&d.preference));
  cuda_detail::count_gemm_descriptors(5);
  CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(d.preference,
                                                    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES,
                                                    &workspace_bytes, sizeof(workspace_bytes)));
  // The column-major A is B, B is A, and C and D are C.
  const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> alignments[] = {
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, s.align_b},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, s.align_a},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, s.align_c},
      {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, s.align_c}};
  for (const auto& [attribute, bytes] : alignments) {
    CUBLAS_CHECK(
        cublasLtMatmulPreferenceSetAttribute(d.preference, attribute, &bytes, sizeof(bytes)));
  }
}

// The heuristic's best algorithm for `d`, asked at `site`, into `algo`;
// false when it has none.
bool find_algorithm(cublasLtHandle_t handle, const LtDescriptors& d,
                    [[maybe_unused]] std::string_view site, cublasLtMatmulAlgo_t* algo) {
  cublasLtMatmulHeuristicResult_t best{};
  int found = 0;
  cuda_detail::count_gemm_heuristic_query();
#ifdef MPIASR_CUDA_EMU
  emu::set_heuristic_site(site, kGemmSites);
#endif
  const cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(handle, d.matmul, d.a, d.b, d.c, d.c,
                                                               d.preference, 1, &best, &found);
  if (status == CUBLAS_STATUS_NOT_SUPPORTED || (status == CUBLAS_STATUS_SUCCESS && found == 0)) {
    return false;
  }
  CUBLAS_CHECK(status);
  *algo = best.algo;
  return true;
}

}  // namespace

// How a shape runs: kFused, the matmul with its epilogue; kPlainThenEpilogue,
// the matmul without it, then cuda_gemm_epilogue; kKernels, cuda_gemm_kernels.
struct GemmPlan {
  enum class Route { kFused, kPlainThenEpilogue, kKernels } route = Route::kFused;
  LtDescriptors lt;
  cublasLtMatmulAlgo_t algo{};
};

GemmPlans::GemmPlans() = default;
GemmPlans::~GemmPlans() = default;

namespace {

std::unique_ptr<GemmPlan> make_plan(const GemmContext& context, const GemmShape& s, void* vector) {
  auto plan = std::make_unique<GemmPlan>();
  describe(plan->lt, s, vector, context.workspace_bytes);
  if (find_algorithm(context.handle, plan->lt, s.site, &plan->algo)) return plan;
  if (s.epilogue != GemmEpilogue::kNone) {
    set_epilogue(plan->lt.matmul, GemmEpilogue::kNone);
    plan->route = GemmPlan::Route::kPlainThenEpilogue;
    if (find_algorithm(context.handle, plan->lt, s.site, &plan->algo)) return plan;
  }
  plan->route = GemmPlan::Route::kKernels;
  return plan;
}

void run_gemm(const GemmContext& context, std::string_view site, bool trans_a, bool trans_b, int M,
              int N, int K, float alpha, const void* A, int lda, const void* B, int ldb,
              cudaDataType_t ab_type, float beta, void* C, cudaDataType_t c_type, int ldc,
              GemmEpilogue epilogue, void* vector) {
  if (M <= 0 || N <= 0) return;
  check_gemm_arguments(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  MPIASR_CHECK(ab_type == CUDA_R_16F || ab_type == CUDA_R_16BF, "gemm input type " << int(ab_type));
  MPIASR_CHECK(c_type == ab_type || c_type == CUDA_R_32F, "gemm output type " << int(c_type));
  const bool takes_vector = epilogue != GemmEpilogue::kNone && epilogue != GemmEpilogue::kRelu;
  MPIASR_CHECK(takes_vector == (vector != nullptr),
               "gemm epilogue " << int(epilogue) << " with vector " << vector);
  MPIASR_CHECK(context.plans, "gemm without plans");
  cuda_detail::count_gemm_call();
  const GemmShape shape(site, trans_a, trans_b, M, N, K, lda, ldb, ldc, ab_type, c_type, epilogue,
                        alignment_of(A), alignment_of(B), alignment_of(C), alignment_of(vector));
  std::unique_ptr<GemmPlan>& slot = context.plans->by_shape[shape];
  if (!slot) slot = make_plan(context, shape, vector);
  GemmPlan& plan = *slot;
  if (plan.route == GemmPlan::Route::kKernels) {
    cuda_gemm_kernels(context.stream, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, ab_type,
                      beta, C, c_type, ldc, epilogue, vector);
    return;
  }
  const bool fused = plan.route == GemmPlan::Route::kFused;
  if (fused && vector) set_vector(plan.lt.matmul, vector);
  if (cuda_detail::sign_work("cublasLtMatmul", trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb,
                             ab_type, beta, C, c_type, ldc, fused ? epilogue : GemmEpilogue::kNone,
                             fused ? vector : nullptr, context.workspace, context.stream)) {
    cuda_detail::count_queued_launch();
    const LtDescriptors& d = plan.lt;
    CUBLAS_CHECK(cublasLtMatmul(context.handle, d.matmul, &alpha, B, d.a, A, d.b, &beta, C, d.c, C,
                                d.c, &plan.algo, context.workspace, context.workspace_bytes,
                                context.stream));
  }
  if (!fused) {
    cuda_gemm_epilogue(context.stream, trans_a, M, N, K, A, lda, ab_type, C, c_type, ldc, epilogue,
                       vector);
  }
}

}  // namespace

void cuda_gemm(const GemmContext& context, std::string_view site, bool trans_a, bool trans_b, int M,
               int N, int K, float alpha, const void* A, int lda, const void* B, int ldb,
               cudaDataType_t ab_type, float beta, void* C, cudaDataType_t c_type, int ldc,
               GemmEpilogue epilogue, void* vector) {
  MPIASR_CHECK(
      std::find(std::begin(kGemmSites), std::end(kGemmSites), site) != std::end(kGemmSites),
      "gemm at \"" << site << "\", which is not in kGemmSites (kernels/cuda/gemm.h)");
  try {
    run_gemm(context, site, trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, ab_type, beta, C,
             c_type, ldc, epilogue, vector);
  } catch (const Error& error) {
    throw Error(error.code(), "cuda_gemm at " + std::string(site) + ": " + error.what());
  }
}

}  // namespace mpiasr
