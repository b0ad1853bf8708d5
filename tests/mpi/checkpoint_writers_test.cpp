// Checkpoint writer policy and resume agreement: which ranks write in each
// filesystem mode (counted over the world with plain MPI), and which step all
// ranks resume from when the writers' disks hold different steps, including
// the log line rank 0 prints when it falls back.
#include "mpi/checkpoint_writers.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include "src/base/error.h"
#include "tests/mpi/mpi_test_util.h"

namespace mpiasr::mpi {
namespace {

using namespace test;

int count_writers(const Context& ctx, const std::string& mode) {
  int mine = is_checkpoint_writer(ctx, mode) ? 1 : 0;
  int total = 0;
  MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  return total;
}

TEST(CheckpointWriters, SharedModeWritesFromRankZeroOnly) {
  Context ctx = test_context();
  EXPECT_EQ(is_checkpoint_writer(ctx, "shared"), ctx.world_rank() == 0);
  EXPECT_EQ(count_writers(ctx, "shared"), 1);
}

TEST(CheckpointWriters, PerNodeModeWritesFromEveryNodeLeader) {
  Context ctx = test_context();
  EXPECT_EQ(is_checkpoint_writer(ctx, "per-node"), ctx.local_rank() == 0);
  EXPECT_EQ(count_writers(ctx, "per-node"), ctx.num_nodes());
}

TEST(CheckpointWriters, UnknownModeIsAUsageError) {
  Context ctx = test_context();
  try {
    is_checkpoint_writer(ctx, "nfs");
    ADD_FAILURE() << "accepted fs_mode 'nfs'";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_NE(std::string(e.what()).find("'nfs'"), std::string::npos) << e.what();
  }
}

// Runs agree_resume_step and returns (result, what rank 0 printed).
std::pair<std::optional<int64_t>, std::string> agree(const Context& ctx, const std::string& mode,
                                                     const std::vector<int64_t>& steps) {
  testing::internal::CaptureStderr();
  std::optional<int64_t> step = agree_resume_step(ctx, mode, steps);
  return {step, testing::internal::GetCapturedStderr()};
}

TEST(ResumeAgreement, SharedModeTakesRankZerosNewest) {
  Context ctx = test_context();
  // Only rank 0's list counts; other ranks pass lists that would disagree.
  const std::vector<int64_t> steps =
      ctx.is_main() ? std::vector<int64_t>{300, 100, 200} : std::vector<int64_t>{999};
  auto [step, log] = agree(ctx, "shared", steps);
  EXPECT_EQ(step, std::optional<int64_t>(300));
  EXPECT_EQ(log, "");
  auto [none, none_log] = agree(ctx, "shared", ctx.is_main() ? std::vector<int64_t>{} : steps);
  EXPECT_EQ(none, std::nullopt);
}

// Node 0 finished step 400, the other nodes crashed before writing it.
TEST(ResumeAgreement, PerNodeFallsBackToTheNewestCommonStep) {
  Context ctx = test_context();
  std::vector<int64_t> steps = {100, 300, 200, 300};  // unsorted, duplicated
  if (ctx.node_index() == 0) steps.push_back(400);
  if (!ctx.is_node_leader()) steps = {1000};  // not a writer: ignored
  auto [step, log] = agree(ctx, "per-node", steps);
  if (ctx.num_nodes() == 1) {
    EXPECT_EQ(step, std::optional<int64_t>(400));
    EXPECT_EQ(log, "");
    return;
  }
  EXPECT_EQ(step, std::optional<int64_t>(300));
  if (ctx.is_main()) {
    std::string expected;
    for (int node = 1; node < ctx.num_nodes(); ++node) {
      expected += ctx.node_name(node) + " lacks step 400; resuming from 300\n";
    }
    EXPECT_EQ(log, expected);
  } else {
    EXPECT_EQ(log, "");
  }
}

TEST(ResumeAgreement, PerNodeWithoutACommonStepStartsFromScratch) {
  Context ctx = test_context();
  // The last node only has step 50; every other node has 500.
  const bool last = ctx.node_index() == ctx.num_nodes() - 1;
  const std::vector<int64_t> steps =
      ctx.num_nodes() > 1 && last ? std::vector<int64_t>{50} : std::vector<int64_t>{500};
  auto [step, log] = agree(ctx, "per-node", steps);
  if (ctx.num_nodes() == 1) {
    EXPECT_EQ(step, std::optional<int64_t>(500));
    return;
  }
  EXPECT_EQ(step, std::nullopt);
  if (ctx.is_main()) {
    EXPECT_EQ(log, ctx.node_name(ctx.num_nodes() - 1) +
                       " lacks step 500; no step is intact on every node, starting from scratch\n");
  }
}

TEST(ResumeAgreement, NothingAnywhere) {
  Context ctx = test_context();
  for (const char* mode : {"shared", "per-node"}) {
    auto [step, log] = agree(ctx, mode, {});
    EXPECT_EQ(step, std::nullopt) << mode;
    EXPECT_EQ(log, "") << mode;
  }
}

}  // namespace
}  // namespace mpiasr::mpi

#include "tests/mpi/mpi_test_main.h"
