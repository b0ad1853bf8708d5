// cuBLASLt on the CPU, for the emulation build (MPIASR_CUDA_EMU;
// kernels/cuda_emu/include/cublasLt.h includes this): the handle, the
// descriptors and cublasLtMatmul as kernels/cuda/gemm.cpp uses them, with
// cuBLASLt's names, codes, attribute sizes and column-major semantics,
// computed on the CPU in a fixed order:
//   D = epilogue(alpha op(A) op(B) + beta C)   column-major, D m x n, op(A) m x k
// with C and D of one layout (they may be the same memory). A and B are both
// fp16 (CUDA_R_16F) or both bf16 (CUDA_R_16BF), converted exactly to float; C
// and D are of their type or fp32; the compute type is CUBLAS_COMPUTE_32F
// with fp32 scales: products and sums in float, then alpha, beta and the
// epilogue in float and one rounding to D's type, as cuBLASLt does. The
// order of the float sums is cuBLASLt's own; here each element's products
// are added one at a time in ascending k, on one thread. A product of two
// 16-bit values is exact in float, so the result is the same bits on every
// host, whatever its BLAS, thread count or vector width: the emulator's
// runs compare bit for bit across hosts and ranks. alpha and beta are host
// pointers. Epilogues:
//   CUBLASLT_EPILOGUE_DEFAULT     none
//   CUBLASLT_EPILOGUE_RELU        D = max(D, 0)
//   CUBLASLT_EPILOGUE_BIAS        D[i, j] += bias[i]          (bias [m], D's type)
//   CUBLASLT_EPILOGUE_RELU_BIAS   D[i, j] = max(D[i, j] + bias[i], 0)
//   CUBLASLT_EPILOGUE_BGRADA      bias[i] = sum_k op(A)[i, k]  (written, [m], C's type)
//   CUBLASLT_EPILOGUE_BGRADB      bias[j] = sum_k op(B)[k, j]  (written, [n], C's type)
// bias being CUBLASLT_MATMUL_DESC_BIAS_POINTER. Other data, compute or scale
// types, epilogues, bias types and attributes give CUBLAS_STATUS_NOT_SUPPORTED;
// shapes that do not fit, a wrong attribute size or a missing bias pointer
// CUBLAS_STATUS_INVALID_VALUE. Work runs before the call returns, or is
// recorded (with alpha and beta as they are now) when the stream is capturing
// a graph (runtime.h); each matmul counts as one launch. The workspace is
// only checked.
//
// Strict where cuBLASLt's documentation (cublasLt.h of CUDA 13.0, whose
// comments are the reference's text) leaves the real library free to fail:
// - Alignment. The heuristic does not see the matrices' pointers; it assumes
//   each of A, B, C and D aligned to its CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_
//   <X>_BYTES ("Selecting a smaller value will exclude algorithms that can
//   not work with matrix <X> that is not as strictly aligned as they need",
//   default 256), and an algorithm's alignment applies to "buffer pointer,
//   leading dimension" (CUBLASLT_ALGO_CAP_MIN_ALIGNMENT_<X>_BYTES). The
//   emulated heuristic returns the worst algorithm that allows: one that
//   needs each matrix aligned to min(preference, the alignment of its leading
//   dimension in bytes) and the bias vector as aligned as the pointer it was
//   asked with (CUBLASLT_MATMUL_DESC_BIAS_POINTER: the heuristic "depend[s] on
//   its value to determine expected pointer alignment"). cublasLtMatmul
//   refuses a pointer less aligned than its algorithm needs, or an algorithm
//   found for other types, transposes or epilogue, with
//   CUBLAS_STATUS_INVALID_VALUE ("parameters are in conflict") and a line on
//   stderr naming the matrix; a null algorithm needs what the heuristic
//   would assume by default. The leading dimensions' multiples of 16 bytes
//   that cuBLAS's "Tensor Core Usage" names are a condition of speed, not
//   of success, and are not required.
// - Bias gradients. The documentation does not list the transposes BGRADA
//   and BGRADB have kernels for; the heuristic here finds BGRADB only with
//   op(B) = B^T and BGRADA only with op(A) = A, the forms in which
//   consecutive bias elements sum consecutive memory (BGRADB with B^T is the
//   form an H200 ran for kernels/cuda/linear.cpp). Stricter than the
//   documentation: another form is to be tried on hardware first.
// - No algorithm on request. MPIASR_EMU_CUBLASLT_NO_ALGO makes the heuristic
//   answer CUBLAS_STATUS_NOT_SUPPORTED with no algorithm ("no heuristic
//   function available for current configuration"), as a real GPU may for
//   some epilogues, types and leading dimensions: `all` for every call, or a
//   comma-separated list of epilogues (DEFAULT, RELU, BIAS, RELU_BIAS,
//   BGRADA, BGRADB) and GEMM call sites of the project (kernels/cuda/gemm.h's
//   kGemmSites, e.g. linear.dweight; set_heuristic_site below) for the calls
//   with those; read at every query. Any other name is an error that names
//   the variable, its value and the names it knows (so a renamed site
//   cannot silently test nothing). The first query answered with none at a
//   site says so on stderr, once per site.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "kernels/cuda_emu/runtime.h"

typedef enum {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
} cublasStatus_t;

typedef enum {
  CUBLAS_OP_N = 0,
  CUBLAS_OP_T = 1,
  CUBLAS_OP_C = 2,
} cublasOperation_t;

typedef enum {
  CUBLAS_COMPUTE_32F = 68,
} cublasComputeType_t;

typedef enum {
  CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,
  CUBLASLT_MATMUL_DESC_TRANSA = 3,
  CUBLASLT_MATMUL_DESC_TRANSB = 4,
  CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
  CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
  CUBLASLT_MATMUL_DESC_BIAS_DATA_TYPE = 26,
} cublasLtMatmulDescAttributes_t;

typedef enum {
  CUBLASLT_EPILOGUE_DEFAULT = 1,
  CUBLASLT_EPILOGUE_RELU = 2,
  CUBLASLT_EPILOGUE_BIAS = 4,
  CUBLASLT_EPILOGUE_RELU_BIAS = 6,
  CUBLASLT_EPILOGUE_BGRADA = 256,
  CUBLASLT_EPILOGUE_BGRADB = 512,
} cublasLtEpilogue_t;

typedef enum {
  CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
  CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
} cublasLtMatmulPreferenceAttributes_t;

struct cublasLtContext;
typedef cublasLtContext* cublasLtHandle_t;

struct cublasLtMatmulDescOpaque_t {
  cublasComputeType_t compute_type;
  cudaDataType_t scale_type;
  cublasOperation_t transa = CUBLAS_OP_N;
  cublasOperation_t transb = CUBLAS_OP_N;
  cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_DEFAULT;
  void* bias = nullptr;
  int32_t bias_type = -1;  // -1: D's type (bias) or C's type (bias gradient)
};
typedef cublasLtMatmulDescOpaque_t* cublasLtMatmulDesc_t;

struct cublasLtMatrixLayoutOpaque_t {
  cudaDataType type;
  uint64_t rows, cols;
  int64_t ld;
};
typedef cublasLtMatrixLayoutOpaque_t* cublasLtMatrixLayout_t;

struct cublasLtMatmulPreferenceOpaque_t {
  uint64_t max_workspace_bytes = 0;
  uint32_t min_alignment[4] = {256, 256, 256, 256};  // A, B, C, D, in bytes
};
typedef cublasLtMatmulPreferenceOpaque_t* cublasLtMatmulPreference_t;

typedef struct {
  uint64_t data[8];
} cublasLtMatmulAlgo_t;

typedef struct {
  cublasLtMatmulAlgo_t algo;
  size_t workspaceSize;
  cublasStatus_t state;
  float wavesCount;
  int reserved[4];
} cublasLtMatmulHeuristicResult_t;

cublasStatus_t cublasLtCreate(cublasLtHandle_t* handle);
cublasStatus_t cublasLtDestroy(cublasLtHandle_t handle);
size_t cublasLtGetVersion();
const char* cublasLtGetStatusName(cublasStatus_t status);
const char* cublasLtGetStatusString(cublasStatus_t status);

cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* desc,
                                        cublasComputeType_t compute_type,
                                        cudaDataType_t scale_type);
cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t desc);
cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t desc,
                                              cublasLtMatmulDescAttributes_t attr, const void* buf,
                                              size_t size);

cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* layout, cudaDataType type,
                                          uint64_t rows, uint64_t cols, int64_t ld);
cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t layout);

cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* pref);
cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t pref);
cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t pref,
                                                    cublasLtMatmulPreferenceAttributes_t attr,
                                                    const void* buf, size_t size);

cublasStatus_t cublasLtMatmulAlgoGetHeuristic(
    cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, cublasLtMatrixLayout_t Adesc,
    cublasLtMatrixLayout_t Bdesc, cublasLtMatrixLayout_t Cdesc, cublasLtMatrixLayout_t Ddesc,
    cublasLtMatmulPreference_t preference, int requested_algo_count,
    cublasLtMatmulHeuristicResult_t results[], int* return_algo_count);

cublasStatus_t cublasLtMatmul(cublasLtHandle_t handle, cublasLtMatmulDesc_t desc, const void* alpha,
                              const void* A, cublasLtMatrixLayout_t Adesc, const void* B,
                              cublasLtMatrixLayout_t Bdesc, const void* beta, const void* C,
                              cublasLtMatrixLayout_t Cdesc, void* D, cublasLtMatrixLayout_t Ddesc,
                              const cublasLtMatmulAlgo_t* algo, void* workspace,
                              size_t workspace_bytes, cudaStream_t stream);

namespace mpiasr::emu {

// The project's GEMM call site of the heuristic queries that follow on this
// thread, and every site it has (the names MPIASR_EMU_CUBLASLT_NO_ALGO may
// give): kernels/cuda/gemm.cpp tells them before each query, in the
// emulation build only. Both are copied.
void set_heuristic_site(std::string_view site, std::span<const std::string_view> known_sites);

namespace detail {
// Whether `value`, MPIASR_EMU_CUBLASLT_NO_ALGO's (empty: nothing), asks the
// heuristic to find no algorithm for a query with `epilogue` at `site`
// (empty: not told); throws Error(kUsage) naming the variable, the value and
// the names it knows (`all`, the epilogues, `known_sites`) for an item that
// is none of them.
bool no_algorithm_asked(std::string_view value, cublasLtEpilogue_t epilogue, std::string_view site,
                        std::span<const std::string_view> known_sites);
}  // namespace detail

}  // namespace mpiasr::emu
