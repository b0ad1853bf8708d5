// check_agreement: equal hashes pass; a differing hash stops every rank with
// CollectiveError(kDistributed) whose message names `what`, the ranks that
// differ and both hashes.
#include "mpi/agreement.h"

#include <gtest/gtest.h>

#include "mpi/collectives.h"
#include "src/base/error.h"
#include "tests/mpi/mpi_test_util.h"

namespace mpiasr::mpi {
namespace {

using namespace test;

// The message every rank gets, or "" when check_agreement did not throw.
std::string disagreement(const Context& ctx, const std::string& what, uint64_t hash) {
  try {
    check_agreement(ctx, what, hash);
  } catch (const CollectiveError& e) {
    EXPECT_EQ(e.code(), ExitCode::kDistributed);
    return e.what();
  }
  return "";
}

TEST(Agreement, EqualHashesPass) {
  Context ctx = test_context();
  EXPECT_NO_THROW(check_agreement(ctx, "config", 0x0123456789abcdefULL));
  EXPECT_NO_THROW(check_agreement(ctx, "manifest", 0));
}

TEST(Agreement, OneDifferingRankStopsEveryRank) {
  Context ctx = test_context();
  if (ctx.world_size() < 2) GTEST_SKIP() << "needs two ranks";
  const int last = ctx.world_size() - 1;
  const uint64_t hash = ctx.world_rank() == last ? 0xdeadbeefULL : 0x12345678ULL;
  const std::string message = disagreement(ctx, "config", hash);
  ASSERT_FALSE(message.empty()) << "rank " << ctx.world_rank() << " did not stop";
  EXPECT_NE(message.find("config differs between ranks"), std::string::npos) << message;
  EXPECT_NE(message.find(ctx.rank_name(last) + " has hash 00000000deadbeef"), std::string::npos)
      << message;
  EXPECT_NE(message.find(ctx.rank_name(0) + " has 0000000012345678"), std::string::npos) << message;
  EXPECT_NE(message.find("ranks that differ from rank 0: " + std::to_string(last) + ")"),
            std::string::npos)
      << message;
}

TEST(Agreement, EveryDifferingRankIsListed) {
  Context ctx = test_context();
  if (ctx.world_size() < 4) GTEST_SKIP() << "needs four ranks";
  const bool odd = ctx.world_rank() % 2 == 1;
  const std::string message = disagreement(ctx, "manifest", odd ? 2 : 1);
  std::string expected;
  for (int rank = 1; rank < ctx.world_size(); rank += 2) {
    expected += (expected.empty() ? "" : ", ") + std::to_string(rank);
  }
  EXPECT_NE(message.find("manifest differs between ranks"), std::string::npos) << message;
  EXPECT_NE(message.find("ranks that differ from rank 0: " + expected + ")"), std::string::npos)
      << message;
}

}  // namespace
}  // namespace mpiasr::mpi

#include "tests/mpi/mpi_test_main.h"
