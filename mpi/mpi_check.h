// MPI_CHECK(call): runs an MPI call and, when it does not return MPI_SUCCESS,
// throws mpiasr::Error(kDistributed) naming the call, the file, the line and
// MPI's error string. Errors only come back as return codes on communicators
// whose error handler is MPI_ERRORS_RETURN, which is set on every
// communicator mpi::Communicator owns (MPI's default handler aborts the job).
#pragma once

#include <mpi.h>

#include <string>

#include "src/base/error.h"

namespace mpiasr::mpi::detail {

[[noreturn]] inline void mpi_call_failed(const char* call, int code, const char* file, int line) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) length = 0;
  ::mpiasr::detail::fail(ExitCode::kDistributed, file, line,
                         std::string(call) + " failed: " + std::string(text, size_t(length)) +
                             " (MPI error " + std::to_string(code) + ")");
}

}  // namespace mpiasr::mpi::detail

#define MPI_CHECK(call)                                                                   \
  do {                                                                                    \
    const int mpi_check_code_ = (call);                                                   \
    if (mpi_check_code_ != MPI_SUCCESS) {                                                 \
      ::mpiasr::mpi::detail::mpi_call_failed(#call, mpi_check_code_, __FILE__, __LINE__); \
    }                                                                                     \
  } while (0)
