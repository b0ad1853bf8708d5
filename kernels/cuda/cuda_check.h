// CUDA_CHECK and CUBLAS_CHECK run a CUDA runtime or cuBLASLt call and, when it
// fails, throw mpiasr::Error(kFailure) naming the call, the file, the line and
// the library's own error string. Kernel launches are checked by
// MPIASR_LAUNCH (kernels/cuda/launch.h). (NCCL_CHECK is in
// mpi/cuda/nccl_check.h: only mpi uses NCCL.)
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

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
                         std::string(call) + " failed: " + cublasLtGetStatusName(code) + ": " +
                             cublasLtGetStatusString(code));
}

}  // namespace mpiasr::cuda_detail

#define CUDA_CHECK(call)                                                                    \
  do {                                                                                      \
    const cudaError_t cuda_check_code_ = (call);                                            \
    if (cuda_check_code_ != cudaSuccess) {                                                  \
      ::mpiasr::cuda_detail::cuda_call_failed(#call, cuda_check_code_, __FILE__, __LINE__); \
    }                                                                                       \
  } while (0)

#define CUBLAS_CHECK(call)                                                                      \
  do {                                                                                          \
    const cublasStatus_t cublas_check_code_ = (call);                                           \
    if (cublas_check_code_ != CUBLAS_STATUS_SUCCESS) {                                          \
      ::mpiasr::cuda_detail::cublas_call_failed(#call, cublas_check_code_, __FILE__, __LINE__); \
    }                                                                                           \
  } while (0)
