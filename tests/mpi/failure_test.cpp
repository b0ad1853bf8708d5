// Failure scenarios for the integration scripts (DESIGN.md, invariant 8: no
// silent hangs). Each one ends the whole job, so it runs only when
// MPIASR_TEST_FAILURE names it and is skipped otherwise (as under ctest);
// the scripts check the exit status, the time taken and the messages.
//
//   timeout          the last rank never joins an all-reduce at step 7; the
//                    others abort the job after MPIASR_TEST_TIMEOUT seconds
//                    with "rank R: step 7: loss all-reduce did not finish ...;
//                    waiting for rank N-1 (host): no answer ..."
//   reducer_timeout  the same for GradientReducer::finish ("gradient all-reduce")
//   elsewhere        the last rank waits in another collective ("checkpoint
//                    write") at step 7 while the others all-reduce: each side
//                    times out, naming the other's collective
//   kill             the last rank dies of SIGKILL while the others wait in an
//                    all-reduce with a 300 s timeout: the launcher must end
//                    the job long before that
#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <thread>
#include <vector>

#include "mpi/collectives.h"
#include "mpi/gradient_reducer.h"
#include "tests/mpi/mpi_test_util.h"

namespace mpiasr::mpi {
namespace {

using namespace test;

bool scenario(const char* name) {
  const char* chosen = std::getenv("MPIASR_TEST_FAILURE");
  return chosen && std::string(chosen) == name;
}

double scenario_timeout() {
  return env_int("MPIASR_TEST_TIMEOUT").value_or(3);
}

void stay_away() {
  std::this_thread::sleep_for(std::chrono::seconds(120));
}

TEST(Failure, RankMissingACollectiveAbortsTheJob) {
  if (!scenario("timeout")) GTEST_SKIP() << "MPIASR_TEST_FAILURE=timeout not set";
  Context ctx = test_context();
  ctx.set_timeout(scenario_timeout());
  ctx.set_step(7);
  barrier(ctx, "start");
  if (ctx.world_rank() == ctx.world_size() - 1) {
    stay_away();
  } else {
    allreduce_sum(ctx, 1.0, "loss all-reduce");
  }
  ADD_FAILURE() << "rank " << ctx.world_rank() << " was not stopped";
}

TEST(Failure, RankInAnotherCollectiveIsNamedWithIt) {
  if (!scenario("elsewhere")) GTEST_SKIP() << "MPIASR_TEST_FAILURE=elsewhere not set";
  Context ctx = test_context();
  ctx.set_timeout(scenario_timeout());
  ctx.set_step(7);
  barrier(ctx, "start");
  if (ctx.world_rank() == ctx.world_size() - 1) {
    barrier(ctx, "checkpoint write");
  } else {
    allreduce_sum(ctx, 1.0, "loss all-reduce");
  }
  ADD_FAILURE() << "rank " << ctx.world_rank() << " was not stopped";
}

TEST(Failure, RankMissingTheGradientReductionAbortsTheJob) {
  if (!scenario("reducer_timeout")) GTEST_SKIP() << "MPIASR_TEST_FAILURE=reducer_timeout not set";
  Context ctx = test_context();
  ctx.set_timeout(scenario_timeout());
  ctx.set_step(12);
  std::vector<float> grads(1 << 20, 1.0f);
  GradientReducer reducer(ctx, grads.data(), grads.size(), {.bucket_bytes = 1 << 20});
  barrier(ctx, "start");
  if (ctx.world_rank() == ctx.world_size() - 1) {
    stay_away();
  } else {
    reducer.begin_step();
    reducer.on_grads_ready(0, grads.size());
    reducer.finish();
  }
  ADD_FAILURE() << "rank " << ctx.world_rank() << " was not stopped";
}

TEST(Failure, KilledRankEndsTheJob) {
  if (!scenario("kill")) GTEST_SKIP() << "MPIASR_TEST_FAILURE=kill not set";
  Context ctx = test_context();
  ctx.set_timeout(300);
  barrier(ctx, "start");
  if (ctx.world_rank() == ctx.world_size() - 1) std::raise(SIGKILL);
  allreduce_sum(ctx, 1.0, "all-reduce after a rank died");
  ADD_FAILURE() << "rank " << ctx.world_rank() << " was not stopped";
}

}  // namespace
}  // namespace mpiasr::mpi

#include "tests/mpi/mpi_test_main.h"
