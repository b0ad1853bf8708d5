// Helpers shared by the tests/mpi executables: a world context with a short
// timeout, per-run scratch folders (on the node's own disk when the fake-node
// launcher provides one), and the expected layout that integration scripts
// pass in MPIASR_TEST_* environment variables.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>

#include "mpi/context.h"

namespace mpiasr::mpi::test {

// Context::world() whose collectives give up after 60 s, so a broken test
// aborts the job instead of hanging the suite.
inline Context test_context() {
  Context ctx = Context::world();
  ctx.set_timeout(60);
  return ctx;
}

inline std::optional<int> env_int(const char* name) {
  const char* value = std::getenv(name);
  if (!value || !*value) return std::nullopt;
  return std::atoi(value);
}

// A folder name unique to this run, the same on every rank (rank 0 picks it).
inline std::string run_name(const std::string& prefix) {
  long long id[2] = {(long long)getpid(),
                     (long long)std::chrono::steady_clock::now().time_since_epoch().count()};
  MPI_Bcast(id, 2, MPI_LONG_LONG, 0, MPI_COMM_WORLD);
  return prefix + "-" + std::to_string(id[0]) + "-" + std::to_string(id[1]);
}

// Where this node keeps scratch files: $NODE_DISK (each fake node's own disk)
// or, without one, the build folder. Not created here.
inline std::filesystem::path node_scratch(const std::string& prefix) {
  const char* disk = std::getenv("NODE_DISK");
  const std::filesystem::path root =
      disk && *disk ? std::filesystem::path(disk)
                    : std::filesystem::path(MPIASR_BINARY_DIR) / "mpi_test_scratch";
  return root / run_name(prefix);
}

}  // namespace mpiasr::mpi::test
