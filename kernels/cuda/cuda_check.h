// CUDA_CHECK, CUBLAS_CHECK and NCCL_CHECK run a CUDA runtime, cuBLAS or NCCL
// call and, when it fails, throw mpiasr::Error naming the call, the file, the
// line and the library's own error string. CUDA_CHECK_LAUNCH() follows every
// kernel launch (<<<...>>>), which reports bad launch configurations only
// through cudaGetLastError.
//
// Exit codes: CUDA and cuBLAS failures are kFailure, NCCL failures
// kDistributed (a peer rank or the network is the usual cause).
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <nccl.h>

#include <string>

#include "src/base/error.h"

namespace mpiasr::cuda_detail {

[[noreturn]] inline void cuda_call_failed(const char* call, cudaError_t code, const char* file,
                                          int line) {
  ::mpiasr::detail::fail(
      ExitCode::kFailure, file, line,
      std::string(call) + " failed: " + cudaGetErrorName(code) + ": " + cudaGetErrorString(code));
}

[[noreturn]] inline void cublas_call_failed(const char* call, cublasStatus_t code, const char* file,
                                            int line) {
  ::mpiasr::detail::fail(ExitCode::kFailure, file, line,
                         std::string(call) + " failed: " + cublasGetStatusName(code) + ": " +
                             cublasGetStatusString(code));
}

[[noreturn]] inline void nccl_call_failed(const char* call, ncclResult_t code, const char* file,
                                          int line) {
  ::mpiasr::detail::fail(ExitCode::kDistributed, file, line,
                         std::string(call) + " failed: " + ncclGetErrorString(code) +
                             " (NCCL error " + std::to_string(int(code)) + ")");
}

}  // namespace mpiasr::cuda_detail

#define CUDA_CHECK(call)                                                                    \
  do {                                                                                      \
    const cudaError_t cuda_check_code_ = (call);                                            \
    if (cuda_check_code_ != cudaSuccess) {                                                  \
      ::mpiasr::cuda_detail::cuda_call_failed(#call, cuda_check_code_, __FILE__, __LINE__); \
    }                                                                                       \
  } while (0)

#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())

#define CUBLAS_CHECK(call)                                                                      \
  do {                                                                                          \
    const cublasStatus_t cublas_check_code_ = (call);                                           \
    if (cublas_check_code_ != CUBLAS_STATUS_SUCCESS) {                                          \
      ::mpiasr::cuda_detail::cublas_call_failed(#call, cublas_check_code_, __FILE__, __LINE__); \
    }                                                                                           \
  } while (0)

#define NCCL_CHECK(call)                                                                    \
  do {                                                                                      \
    const ncclResult_t nccl_check_code_ = (call);                                           \
    if (nccl_check_code_ != ncclSuccess) {                                                  \
      ::mpiasr::cuda_detail::nccl_call_failed(#call, nccl_check_code_, __FILE__, __LINE__); \
    }                                                                                       \
  } while (0)
