// run_on_main / run_once_per_node: how many times and where f runs (counted
// with plain MPI_Allreduce), that the other ranks wait for it, that a file f
// writes lands on each node's own disk, and that an exception in f stops
// every rank.
#include "mpi/run_on.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "mpi/collectives.h"
#include "src/base/error.h"
#include "tests/mpi/mpi_test_util.h"

namespace mpiasr::mpi {
namespace {

using namespace test;
namespace fs = std::filesystem;

int sum_over(MPI_Comm comm, int value) {
  int total = 0;
  MPI_Allreduce(&value, &total, 1, MPI_INT, MPI_SUM, comm);
  return total;
}

TEST(RunOn, MainRunsOnceOnRankZero) {
  Context ctx = test_context();
  int runs = 0;
  run_on_main(ctx, [&] { ++runs; });
  EXPECT_EQ(runs, ctx.is_main() ? 1 : 0);
  EXPECT_EQ(sum_over(MPI_COMM_WORLD, runs), 1);
}

TEST(RunOn, OthersWaitForMain) {
  Context ctx = test_context();
  const auto start = std::chrono::steady_clock::now();
  run_on_main(ctx, [] { std::this_thread::sleep_for(std::chrono::milliseconds(300)); });
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  // A rank may start its clock late on a busy machine: 100 ms of slack.
  EXPECT_GE(waited, 0.2) << "rank " << ctx.world_rank() << " left before rank 0 finished";
}

TEST(RunOn, OncePerNodeRunsOnEveryNodeLeader) {
  Context ctx = test_context();
  int runs = 0;
  run_once_per_node(ctx, [&] { ++runs; });
  EXPECT_EQ(runs, ctx.is_node_leader() ? 1 : 0);
  EXPECT_EQ(sum_over(ctx.node_comm(), runs), 1);
  EXPECT_EQ(sum_over(MPI_COMM_WORLD, runs), ctx.num_nodes());
}

// f writes a marker named after its node on the node's disk; afterwards every
// rank finds its own node's marker. With one disk per node ($NODE_DISK under
// scripts/mpirun-fake-nodes.sh) it is the only marker there; with one shared
// disk (one machine, or Slurm's fake nodes) every node's marker is.
TEST(RunOn, OncePerNodeWritesOnEachNodesDisk) {
  Context ctx = test_context();
  const fs::path dir = node_scratch("run_once_per_node");
  const fs::path marker = dir / ("node-" + std::to_string(ctx.node_index()));
  run_once_per_node(ctx, [&] {
    fs::create_directories(dir);
    std::ofstream(marker) << ctx.hostname() << "\n";
  });
  ASSERT_TRUE(fs::exists(marker)) << marker;
  std::string host;
  std::ifstream(marker) >> host;
  EXPECT_EQ(host, ctx.hostname());
  size_t markers = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(dir)) ++markers;
  const bool own_disks = std::getenv("NODE_DISK") != nullptr;
  EXPECT_EQ(markers, own_disks ? 1u : size_t(ctx.num_nodes()));
  barrier(ctx, "markers checked");
  std::error_code ignored;  // with a shared disk, leaders remove the same folder
  run_once_per_node(ctx, [&] { fs::remove_all(dir, ignored); });
}

TEST(RunOn, ExceptionInMainStopsEveryRank) {
  Context ctx = test_context();
  try {
    run_on_main(ctx, [] { MPIASR_FAIL(ExitCode::kBadInput, "no such manifest: x.tsv"); });
    ADD_FAILURE() << "rank " << ctx.world_rank() << " did not throw";
  } catch (const Error& e) {
    const std::string message = e.what();
    if (ctx.is_main()) {
      EXPECT_EQ(e.code(), ExitCode::kBadInput);
      EXPECT_NE(message.find("no such manifest: x.tsv"), std::string::npos) << message;
    } else {
      EXPECT_EQ(e.code(), ExitCode::kDistributed);
      EXPECT_NE(message.find("run_on_main failed on " + ctx.rank_name(0)), std::string::npos)
          << message;
    }
  }
}

TEST(RunOn, ExceptionOnOneNodeStopsEveryRank) {
  Context ctx = test_context();
  const int failing_node = ctx.num_nodes() - 1;
  int failing_rank = 0;
  while (ctx.node_of(failing_rank) != failing_node) ++failing_rank;
  try {
    run_once_per_node(ctx, [&] {
      if (ctx.node_index() == failing_node) throw std::runtime_error("disk full");
    });
    ADD_FAILURE() << "rank " << ctx.world_rank() << " did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kDistributed);
    EXPECT_NE(
        std::string(e.what()).find("run_once_per_node failed on " + ctx.rank_name(failing_rank)),
        std::string::npos)
        << e.what();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(ctx.world_rank(), failing_rank);
    EXPECT_STREQ(e.what(), "disk full");
  }
}

}  // namespace
}  // namespace mpiasr::mpi

#include "tests/mpi/mpi_test_main.h"
