// cuBLAS on the CPU, for the emulation build (MPIASR_CUDA_EMU;
// kernels/cuda_emu/include/cublas_v2.h includes this): the handle calls and
// the two GEMMs kernels/cuda/gemm.cpp makes, with cuBLAS's names, codes and
// column-major semantics, computed by the CPU backend's GEMM
// (kernels/cpu/gemm.h):
//   C = alpha op(A) op(B) + beta C      column-major, C m x n, op(A) m x k
// A and B are both fp16 (CUDA_R_16F) or both bf16 (CUDA_R_16BF), converted
// exactly to float; C is of their type or fp32;
// the compute type is CUBLAS_COMPUTE_32F: products and sums in float, then
// alpha and beta in float and one rounding to C's type, as cuBLAS does (the
// order of the float sums differs). alpha and beta are host pointers. Other
// data or compute types give CUBLAS_STATUS_NOT_SUPPORTED. Work runs before the
// call returns, or is recorded (with alpha and beta as they are now) when the
// handle's stream is capturing a graph (runtime.h); each call counts as one
// launch. The workspace is only checked.
#pragma once

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
  CUBLAS_GEMM_DEFAULT = -1,
} cublasGemmAlgo_t;

struct cublasContext;
typedef cublasContext* cublasHandle_t;

cublasStatus_t cublasCreate(cublasHandle_t* handle);
cublasStatus_t cublasDestroy(cublasHandle_t handle);
cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream);
cublasStatus_t cublasSetWorkspace(cublasHandle_t handle, void* workspace, size_t bytes);
const char* cublasGetStatusName(cublasStatus_t status);
const char* cublasGetStatusString(cublasStatus_t status);

cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa,
                            cublasOperation_t transb, int m, int n, int k, const void* alpha,
                            const void* A, cudaDataType Atype, int lda, const void* B,
                            cudaDataType Btype, int ldb, const void* beta, void* C,
                            cudaDataType Ctype, int ldc, cublasComputeType_t computeType,
                            cublasGemmAlgo_t algo);

cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                          cublasOperation_t transb, int m, int n, int k,
                                          const void* alpha, const void* A, cudaDataType Atype,
                                          int lda, long long strideA, const void* B,
                                          cudaDataType Btype, int ldb, long long strideB,
                                          const void* beta, void* C, cudaDataType Ctype, int ldc,
                                          long long strideC, int batchCount,
                                          cublasComputeType_t computeType, cublasGemmAlgo_t algo);
