// Helpers shared by the tests/mpi executables: a world context with a short
// timeout, per-run scratch folders (on the node's own disk when the fake-node
// launcher provides one), the expected layout that integration scripts
// pass in MPIASR_TEST_* environment variables, and the check of a reducer's
// timeline.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "mpi/bucket_plan.h"
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

// A reducer's timeline of one step run between `before` and `after`
// (record_timeline; the MPI or the NCCL reducer): every bucket, with its
// bytes, before <= ready <= start <= end <= after, starts in bucket order.
template <typename Reducer>
void expect_step_timeline(const Reducer& reducer, std::chrono::steady_clock::time_point before,
                          std::chrono::steady_clock::time_point after) {
  const std::vector<BucketTimes>& timeline = reducer.last_timeline();
  ASSERT_EQ(timeline.size(), reducer.num_buckets());
  for (size_t b = 0; b < timeline.size(); ++b) {
    const BucketTimes& t = timeline[b];
    EXPECT_EQ(t.bytes, 4 * reducer.bucket_range(b).second) << "bucket " << b;
    EXPECT_TRUE(before <= t.ready && t.ready <= t.start && t.start <= t.end && t.end <= after)
        << "bucket " << b;
    if (b > 0) {
      EXPECT_LE(timeline[b - 1].start, t.start) << "bucket " << b;
    }
  }
}

}  // namespace mpiasr::mpi::test
