// Errors: one exception type for everything the user can get wrong or the
// system can fail at, and the macros that check calls and conditions and name
// the call, the file and the line. Library code throws; the program's
// main() prints the message and exits with the code of the error's kind.
//
// src/base/ is the base layer (DESIGN.md, "Layers"): it includes nothing of
// the project, and every layer may include it.
#pragma once

#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>

namespace mpiasr {

// Exit codes of the mpiasr program, one per kind of failure.
enum class ExitCode : int {
  kOk = 0,
  kFailure = 1,      // internal error
  kUsage = 2,        // bad command line or config; an output file that cannot be written
  kBadInput = 3,     // bad manifest, audio, transcript
  kCheckpoint = 4,   // no usable checkpoint, corrupt file
  kDistributed = 5,  // rank mismatch, collective timeout, a rank died
  kNonFinite = 6,    // loss or gradients diverged
  kOutputInUse = 7,  // output.dir is held by another run (src/output_lock.h)
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

// Tells a destructor whether it runs because an exception is leaving its
// scope (stack unwinding) rather than at a normal end of scope: more
// exceptions are in flight than when the owner was made. An owner of a
// handle that peers must join to close cleanly (an NCCL communicator) closes
// it at once instead while unwinding, since the peers may never join.
class UnwindDetector {
 public:
  bool unwinding() const { return std::uncaught_exceptions() > in_flight_at_creation_; }

 private:
  int in_flight_at_creation_ = std::uncaught_exceptions();
};

namespace detail {
[[noreturn]] inline void fail(ExitCode code, const char* file, int line, const std::string& what) {
  std::ostringstream out;
  out << what << " (" << file << ":" << line << ")";
  throw Error(code, out.str());
}
}  // namespace detail

}  // namespace mpiasr

// MPIASR_CHECK(cond, "message " << value): throws Error naming file and line.
#define MPIASR_CHECK(cond, msg)                                                      \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::ostringstream mpiasr_check_msg_;                                          \
      mpiasr_check_msg_ << msg;                                                      \
      ::mpiasr::detail::fail(::mpiasr::ExitCode::kFailure, __FILE__, __LINE__,       \
                             "check failed: " #cond ": " + mpiasr_check_msg_.str()); \
    }                                                                                \
  } while (0)

// MPIASR_FAIL(ExitCode::kBadInput, "file " << path << ": ..."): throws Error.
#define MPIASR_FAIL(code, msg)                                                \
  do {                                                                        \
    std::ostringstream mpiasr_fail_msg_;                                      \
    mpiasr_fail_msg_ << msg;                                                  \
    ::mpiasr::detail::fail(code, __FILE__, __LINE__, mpiasr_fail_msg_.str()); \
  } while (0)
