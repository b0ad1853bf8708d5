// cuBLASLt on the CPU, for the emulation build (MPIASR_CUDA_EMU;
// kernels/cuda_emu/include/cublasLt.h includes this): the handle, the
// descriptors and cublasLtMatmul as kernels/cuda/gemm.cpp uses them, with
// cuBLASLt's names, codes, attribute sizes and column-major semantics,
// computed by the CPU backend's GEMM (kernels/cpu/gemm.h):
//   D = epilogue(alpha op(A) op(B) + beta C)   column-major, D m x n, op(A) m x k
// with C and D of one layout (they may be the same memory). A and B are both
// fp16 (CUDA_R_16F) or both bf16 (CUDA_R_16BF), converted exactly to float; C
// and D are of their type or fp32; the compute type is CUBLAS_COMPUTE_32F
// with fp32 scales: products and sums in float, then alpha, beta and the
// epilogue in float and one rounding to D's type, as cuBLASLt does (the order
// of the float sums differs). alpha and beta are host pointers. Epilogues:
//   CUBLASLT_EPILOGUE_DEFAULT     none
//   CUBLASLT_EPILOGUE_RELU        D = max(D, 0)
//   CUBLASLT_EPILOGUE_BIAS        D[i, j] += bias[i]          (bias [m], D's type)
//   CUBLASLT_EPILOGUE_RELU_BIAS   D[i, j] = max(D[i, j] + bias[i], 0)
//   CUBLASLT_EPILOGUE_BGRADA      bias[i] = sum_k op(A)[i, k]  (written, [m], C's type)
//   CUBLASLT_EPILOGUE_BGRADB      bias[j] = sum_k op(B)[k, j]  (written, [n], C's type)
// bias being CUBLASLT_MATMUL_DESC_BIAS_POINTER. Other data, compute or scale
// types, epilogues, bias types and attributes give CUBLAS_STATUS_NOT_SUPPORTED;
// shapes that do not fit, a wrong attribute size or a missing bias pointer
// CUBLAS_STATUS_INVALID_VALUE. The heuristic finds one algorithm exactly
// when the matmul would run, and the matmul accepts a null algorithm. Work
// runs before the call returns, or is recorded (with alpha and beta as they
// are now) when the stream is capturing a graph (runtime.h); each matmul
// counts as one launch. The workspace is only checked.
#pragma once

#include <cstddef>
#include <cstdint>

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
