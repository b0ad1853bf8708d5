// Context: world, node and leaders communicators, local ranks, node indices
// and hostnames, checked against what MPI reports directly (MPI_COMM_WORLD,
// MPI_Get_processor_name) and, when an integration script says what layout it
// launched (MPIASR_TEST_NODES, MPIASR_TEST_HOSTS), against that.
#include "mpi/context.h"

#include <gtest/gtest.h>
#include <sched.h>

#include <cmath>
#include <set>
#include <thread>
#include <vector>

#include "src/base/error.h"
#include "tests/mpi/mpi_test_util.h"

namespace mpiasr::mpi {
namespace {

using namespace test;

struct RankInfo {
  int node_index;
  int local_rank;
  int local_size;
  int num_nodes;
  int leader;
  int leaders_size;
  char hostname[MPI_MAX_PROCESSOR_NAME];
};

std::vector<RankInfo> gather_infos(const Context& ctx) {
  RankInfo mine{};
  mine.node_index = ctx.node_index();
  mine.local_rank = ctx.local_rank();
  mine.local_size = ctx.local_size();
  mine.num_nodes = ctx.num_nodes();
  mine.leader = ctx.is_node_leader();
  int leaders_size = -1;
  if (ctx.leaders_comm() != MPI_COMM_NULL) MPI_Comm_size(ctx.leaders_comm(), &leaders_size);
  mine.leaders_size = leaders_size;
  snprintf(mine.hostname, sizeof mine.hostname, "%s", ctx.hostname().c_str());
  std::vector<RankInfo> all(size_t(ctx.world_size()));
  MPI_Allgather(&mine, sizeof(RankInfo), MPI_BYTE, all.data(), sizeof(RankInfo), MPI_BYTE,
                MPI_COMM_WORLD);
  return all;
}

TEST(Context, WorldMatchesMpiCommWorld) {
  Context ctx = test_context();
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  EXPECT_EQ(ctx.world_rank(), rank);
  EXPECT_EQ(ctx.world_size(), size);
  EXPECT_EQ(ctx.is_main(), rank == 0);
  char name[MPI_MAX_PROCESSOR_NAME];
  int length = 0;
  MPI_Get_processor_name(name, &length);
  EXPECT_EQ(ctx.hostname(), std::string(name, size_t(length)));
  EXPECT_EQ(ctx.hostname_of(rank), ctx.hostname());
  EXPECT_EQ(ctx.node_of(rank), ctx.node_index());
  int compare = MPI_UNEQUAL;
  MPI_Comm_compare(ctx.world_comm(), MPI_COMM_WORLD, &compare);
  EXPECT_EQ(compare, MPI_CONGRUENT);  // a duplicate: same group, own context
}

// Nodes partition the world; on each node the local ranks are 0..k-1 in world
// rank order; node indices are 0..N-1 in the order of the nodes' lowest ranks;
// exactly the local ranks 0 form the leaders communicator.
TEST(Context, NodesPartitionTheWorld) {
  Context ctx = test_context();
  const std::vector<RankInfo> all = gather_infos(ctx);
  const int num_nodes = ctx.num_nodes();
  std::vector<int> next_local(size_t(num_nodes), 0);
  std::vector<int> members(size_t(num_nodes), 0);
  int next_new_node = 0;
  for (int rank = 0; rank < ctx.world_size(); ++rank) {
    const RankInfo& info = all[size_t(rank)];
    SCOPED_TRACE("rank " + std::to_string(rank));
    EXPECT_EQ(info.num_nodes, num_nodes);
    ASSERT_GE(info.node_index, 0);
    ASSERT_LT(info.node_index, num_nodes);
    if (next_local[size_t(info.node_index)] == 0) {
      EXPECT_EQ(info.node_index, next_new_node);
      ++next_new_node;
    }
    EXPECT_EQ(info.local_rank, next_local[size_t(info.node_index)]++);
    EXPECT_EQ(info.leader, info.local_rank == 0);
    EXPECT_EQ(info.leaders_size, info.leader ? num_nodes : -1);
    ++members[size_t(info.node_index)];
    // Ranks of one node share a hostname.
    const int leader_rank = [&] {
      for (int r = 0; r < ctx.world_size(); ++r) {
        if (all[size_t(r)].node_index == info.node_index) return r;
      }
      return -1;
    }();
    EXPECT_STREQ(info.hostname, all[size_t(leader_rank)].hostname);
    EXPECT_EQ(ctx.node_of(rank), info.node_index);
    EXPECT_EQ(ctx.hostname_of(rank), std::string(info.hostname));
  }
  EXPECT_EQ(next_new_node, num_nodes);
  for (int rank = 0; rank < ctx.world_size(); ++rank) {
    EXPECT_EQ(all[size_t(rank)].local_size, members[size_t(all[size_t(rank)].node_index)]);
  }
  int node_size = 0;
  MPI_Comm_size(ctx.node_comm(), &node_size);
  EXPECT_EQ(node_size, ctx.local_size());
}

// The layout the launcher was asked for (set by the integration scripts);
// a plain single process is one node of one rank on one host.
TEST(Context, MatchesLaunchedLayout) {
  Context ctx = test_context();
  std::optional<int> nodes = env_int("MPIASR_TEST_NODES");
  std::optional<int> hosts = env_int("MPIASR_TEST_HOSTS");
  if (!nodes && ctx.world_size() == 1) nodes = 1, hosts = 1;
  if (!nodes) GTEST_SKIP() << "MPIASR_TEST_NODES not set by the launcher";
  EXPECT_EQ(ctx.num_nodes(), *nodes);
  EXPECT_EQ(ctx.local_size(), ctx.world_size() / *nodes);
  EXPECT_EQ(ctx.local_rank(), ctx.world_rank() % ctx.local_size())
      << "ranks are placed by slot: node 0 holds the first local_size ranks";
  if (hosts) {
    std::set<std::string> names;
    for (int rank = 0; rank < ctx.world_size(); ++rank) names.insert(ctx.hostname_of(rank));
    EXPECT_EQ(int(names.size()), *hosts);
  }
}

TEST(Context, DefaultThreadsSplitTheCpusThisRankMayUse) {
  Context ctx = test_context();
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  const int cpus = CPU_COUNT(&mask);
  EXPECT_GE(ctx.default_threads(), 1);
  EXPECT_LE(ctx.default_threads(), std::max(1, cpus));
  // The node's ranks never get more threads in total than the node has CPUs
  // (unless each already has its minimum of one).
  int total = 0;
  const int mine = ctx.default_threads();
  MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, ctx.node_comm());
  if (total > ctx.local_size()) {
    EXPECT_LE(total, int(std::thread::hardware_concurrency()));
  }
  if (ctx.world_size() == 1) {
    EXPECT_EQ(ctx.default_threads(), cpus);
  }
}

// Threads from an option: 0 is the default, 1..the cores this process may use
// are taken, anything else is a usage error naming the option and the cores
// (a thread count of 10^5 crashed inside OpenMP or ran out of memory).
TEST(Context, ComputeThreadsIsBoundedByTheUsableCores) {
  Context ctx = test_context();
  cpu_set_t mask;
  ASSERT_EQ(sched_getaffinity(0, sizeof mask, &mask), 0);
  const int cpus = CPU_COUNT(&mask);
  EXPECT_EQ(ctx.usable_cores(), cpus);
  EXPECT_EQ(ctx.compute_threads(0, "--threads"), ctx.default_threads());
  EXPECT_EQ(ctx.compute_threads(1, "--threads"), 1);
  EXPECT_EQ(ctx.compute_threads(cpus, "--threads"), cpus);
  for (int bad : {-1, cpus + 1, 100000}) {
    try {
      ctx.compute_threads(bad, "training.threads");
      ADD_FAILURE() << bad << " accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kUsage);
      const std::string expected = "training.threads = " + std::to_string(bad) +
                                   ": expected 1 to " + std::to_string(cpus) +
                                   ", the cores this process may use on " + ctx.hostname();
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
    }
  }
}

TEST(Context, NamesAndDescription) {
  Context ctx = test_context();
  EXPECT_EQ(ctx.rank_name(0), "rank 0 (" + ctx.hostname_of(0) + ")");
  EXPECT_EQ(ctx.node_name(0), "node 0 (" + ctx.hostname_of(0) + ")");
  const std::string text = ctx.describe();
  EXPECT_NE(text.find("rank " + std::to_string(ctx.world_rank()) + "/" +
                      std::to_string(ctx.world_size())),
            std::string::npos)
      << text;
  EXPECT_NE(text.find(ctx.hostname()), std::string::npos) << text;
  EXPECT_THROW(ctx.node_name(ctx.num_nodes()), Error);
}

TEST(Context, TimeoutAndStep) {
  Context ctx = test_context();
  EXPECT_EQ(ctx.step(), 0);
  ctx.set_step(42);
  EXPECT_EQ(ctx.step(), 42);
  ctx.set_timeout(2.5);
  EXPECT_DOUBLE_EQ(ctx.timeout_s(), 2.5);
  EXPECT_THROW(ctx.set_timeout(0), Error);
  EXPECT_THROW(ctx.set_timeout(-1), Error);
  EXPECT_THROW(ctx.set_timeout(std::nan("")), Error);
}

TEST(Context, ContextsAreIndependent) {
  Context first = test_context();
  Context second = test_context();
  int compare = MPI_IDENT;
  MPI_Comm_compare(first.world_comm(), second.world_comm(), &compare);
  EXPECT_EQ(compare, MPI_CONGRUENT);
  Context moved = std::move(first);
  EXPECT_EQ(moved.world_rank(), second.world_rank());
  EXPECT_NE(moved.world_comm(), MPI_COMM_NULL);
}

}  // namespace
}  // namespace mpiasr::mpi

#include "tests/mpi/mpi_test_main.h"
