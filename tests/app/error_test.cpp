// UnwindDetector (src/base/error.h): a destructor learns whether an exception is
// leaving the scope, also for an owner made while another exception was
// already unwinding the stack (in a destructor that runs during unwinding).
#include "src/base/error.h"

#include <gtest/gtest.h>

#include <optional>

namespace mpiasr {
namespace {

// Records, as it is destroyed, what its detector says.
struct Probe {
  explicit Probe(std::optional<bool>* seen) : seen(seen) {}
  ~Probe() { *seen = detector.unwinding(); }
  UnwindDetector detector;
  std::optional<bool>* seen;
};

TEST(UnwindDetector, ANormalEndOfScopeIsNotUnwinding) {
  std::optional<bool> seen;
  { Probe probe(&seen); }
  EXPECT_EQ(seen, false);
}

TEST(UnwindDetector, AnExceptionLeavingTheScopeIsUnwinding) {
  std::optional<bool> seen;
  try {
    Probe probe(&seen);
    throw Error(ExitCode::kDistributed, "a rank failed");
  } catch (const Error&) {
  }
  EXPECT_EQ(seen, true);
  // Caught inside the scope: the scope then ends normally.
  {
    Probe probe(&seen);
    try {
      throw Error(ExitCode::kFailure, "handled");
    } catch (const Error&) {
    }
  }
  EXPECT_EQ(seen, false);
}

// Made and ended inside a destructor that runs while an exception unwinds:
// its own scope ends normally; one more exception leaving it is unwinding.
struct DuringUnwinding {
  std::optional<bool>* normal;
  std::optional<bool>* thrown;
  ~DuringUnwinding() {
    { Probe probe(normal); }
    try {
      Probe probe(thrown);
      throw Error(ExitCode::kFailure, "second");
    } catch (const Error&) {
    }
  }
};

TEST(UnwindDetector, CountsExceptionsInFlightSinceCreation) {
  std::optional<bool> normal, thrown;
  try {
    DuringUnwinding outer{&normal, &thrown};
    throw Error(ExitCode::kFailure, "first");
  } catch (const Error&) {
  }
  EXPECT_EQ(normal, false);
  EXPECT_EQ(thrown, true);
}

}  // namespace
}  // namespace mpiasr
