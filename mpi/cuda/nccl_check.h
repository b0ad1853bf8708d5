// NCCL_CHECK(call): runs an NCCL call and, when it does not return
// ncclSuccess, throws mpiasr::Error(kDistributed) naming the call, the file,
// the line and NCCL's error string (a peer rank or the network is the usual
// cause, hence the distributed-failure exit code).
#pragma once

#include <nccl.h>

#include <string>

#include "src/base/error.h"

namespace mpiasr::mpi::detail {

[[noreturn]] inline void nccl_call_failed(const char* call, ncclResult_t code, const char* file,
                                          int line) {
  ::mpiasr::detail::fail(ExitCode::kDistributed, file, line,
                         std::string(call) + " failed: " + ncclGetErrorString(code) +
                             " (NCCL error " + std::to_string(int(code)) + ")");
}

}  // namespace mpiasr::mpi::detail

#define NCCL_CHECK(call)                                                                    \
  do {                                                                                      \
    const ncclResult_t nccl_check_code_ = (call);                                           \
    if (nccl_check_code_ != ncclSuccess) {                                                  \
      ::mpiasr::mpi::detail::nccl_call_failed(#call, nccl_check_code_, __FILE__, __LINE__); \
    }                                                                                       \
  } while (0)
