// Collectives with a timeout: sums, minima and maxima over ranks against the
// closed forms of the values each rank contributes; gathers to some ranks;
// first_failing_rank.
#include "mpi/collectives.h"

#include <gtest/gtest.h>

#include <vector>

#include "src/base/error.h"
#include "tests/mpi/mpi_test_util.h"

namespace mpiasr::mpi {
namespace {

using namespace test;

TEST(Collectives, AllreduceSumOfDoubles) {
  Context ctx = test_context();
  const double w = ctx.world_size();
  // Sum over r of (r + 0.25) = W (W - 1) / 2 + W / 4, exact in binary.
  EXPECT_EQ(allreduce_sum(ctx, ctx.world_rank() + 0.25, "sum"), w * (w - 1) / 2 + w / 4);
}

TEST(Collectives, AllreduceMinMaxOfInt64BeyondInt32) {
  Context ctx = test_context();
  const int64_t big = int64_t(1) << 40;
  const int64_t mine = big + 7 * ctx.world_rank() - 3;
  EXPECT_EQ(allreduce_min(ctx, mine, "min"), big - 3);
  EXPECT_EQ(allreduce_max(ctx, mine, "max"), big + 7 * (ctx.world_size() - 1) - 3);
  EXPECT_EQ(allreduce_min(ctx, -mine, "min"), -(big + 7 * (ctx.world_size() - 1) - 3));
}

// Rank r gives {r + 0.1, 1e10 + r} (not floats: the doubles must arrive
// whole) or {r + 0.5, -r}; the even ranks receive every rank's in rank order.
TEST(Collectives, GatherToReceiversOfDoublesAndFloats) {
  Context ctx = test_context();
  const int r = ctx.world_rank();
  const bool receive = r % 2 == 0;
  const std::vector<double> doubles =
      gather_to_receivers(ctx, std::vector<double>{r + 0.1, 1e10 + r}, receive, "gather doubles");
  const std::vector<float> floats =
      gather_to_receivers(ctx, std::vector<float>{r + 0.5f, -float(r)}, receive, "gather floats");
  if (!receive) {
    EXPECT_TRUE(doubles.empty() && floats.empty());
    return;
  }
  ASSERT_EQ(doubles.size(), size_t(2 * ctx.world_size()));
  ASSERT_EQ(floats.size(), size_t(2 * ctx.world_size()));
  for (int rank = 0; rank < ctx.world_size(); ++rank) {
    EXPECT_EQ(doubles[size_t(2 * rank)], rank + 0.1);
    EXPECT_EQ(doubles[size_t(2 * rank + 1)], 1e10 + rank);
    EXPECT_EQ(floats[size_t(2 * rank)], rank + 0.5f);
    EXPECT_EQ(floats[size_t(2 * rank + 1)], -float(rank));
  }
}

TEST(Collectives, AllreduceSumInplaceOfAnArray) {
  Context ctx = test_context();
  const int n = 1000;
  std::vector<double> values(n);
  for (int i = 0; i < n; ++i) values[size_t(i)] = double(i) * (ctx.world_rank() + 1);
  allreduce_sum_inplace(ctx, values.data(), n, "sum array");
  const double w = ctx.world_size();
  const double factor = w * (w + 1) / 2;  // sum over r of (r + 1)
  for (int i = 0; i < n; ++i) ASSERT_EQ(values[size_t(i)], double(i) * factor) << "element " << i;
  allreduce_sum_inplace(ctx, nullptr, 0, "empty");  // nothing to do, still collective
  EXPECT_THROW(allreduce_sum_inplace(ctx, values.data(), -1, "negative"), Error);
}

TEST(Collectives, AllreduceMinInplaceOfAnArray) {
  Context ctx = test_context();
  const int n = 1000, w = ctx.world_size();
  // Element i is smallest on rank i mod W: (i - rank) mod W is 0 there.
  std::vector<double> values(n);
  for (int i = 0; i < n; ++i) values[size_t(i)] = 0.5 * i + ((i - ctx.world_rank()) % w + w) % w;
  allreduce_min_inplace(ctx, values.data(), n, "min array");
  for (int i = 0; i < n; ++i) ASSERT_EQ(values[size_t(i)], 0.5 * i) << "element " << i;
  EXPECT_THROW(allreduce_min_inplace(ctx, values.data(), -1, "negative"), Error);
}

TEST(Collectives, BarrierAndRepeatedCallsStayInStep) {
  Context ctx = test_context();
  for (int i = 0; i < 50; ++i) {
    barrier(ctx, "barrier");
    ASSERT_EQ(allreduce_max(ctx, i, "iteration"), i);
  }
}

TEST(Collectives, FirstFailingRank) {
  Context ctx = test_context();
  EXPECT_EQ(first_failing_rank(ctx, false, "none failed"), -1);
  EXPECT_EQ(first_failing_rank(ctx, true, "all failed"), 0);
  const int last = ctx.world_size() - 1;
  EXPECT_EQ(first_failing_rank(ctx, ctx.world_rank() == last, "last failed"), last);
  const bool odd = ctx.world_rank() % 2 == 1;
  EXPECT_EQ(first_failing_rank(ctx, odd, "odd failed"), ctx.world_size() > 1 ? 1 : -1);
}

}  // namespace
}  // namespace mpiasr::mpi

#include "tests/mpi/mpi_test_main.h"
