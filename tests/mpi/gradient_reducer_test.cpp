// GradientReducer: the bucket layout, and the reduced gradients against one
// plain MPI_Allreduce of the same buffer, for bucket sizes from one element
// (smaller than any layer) to larger than the buffer, layers marked in
// backward order, shuffled or forward, with and without the padding after
// each layer, flat and hierarchical, over several steps. Gradients are
// integers in [-1000, 1000], so every summation order gives the exact sum and
// results compare with ==; real-valued gradients compare with a tolerance.
// A rank late to mark its layers leaves the others' communication threads
// polling, not spinning (their CPU time against the wait), and under
// SCHED_BATCH until finish().
// 16-bit messages (bf16, fp16): exact sums of small integers; real values
// the same on every rank, within the formats' rounding of the exact sum.
// Sharded (ZeRO-1): after the reduce-scatter each rank's pieces hold the
// plain all-reduce's sums, and an all-gather of a buffer that each rank
// filled only in its own pieces gives every rank the whole buffer.
#include "mpi/gradient_reducer.h"

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "src/base/error.h"
#include "tests/base/thread_scheduling.h"
#include "tests/mpi/mpi_test_util.h"

namespace mpiasr::mpi {
namespace {

using namespace test;

constexpr size_t kAlignment = 64;  // as a ParameterStore pads its tensors

// Layers laid out like a ParameterStore: each starts at a multiple of 64.
struct Layout {
  std::vector<std::pair<size_t, size_t>> layers;  // offset, count
  size_t total = 0;
};

Layout make_layout(const std::vector<size_t>& sizes) {
  Layout layout;
  for (size_t size : sizes) {
    layout.layers.push_back({layout.total, size});
    layout.total += (size + kAlignment - 1) / kAlignment * kAlignment;
  }
  return layout;
}

// Integer-valued gradients in [-bound, bound], different on every rank and
// step; padding is 0.
std::vector<float> integer_grads(const Layout& layout, uint32_t seed, int rank, int bound = 1000) {
  std::mt19937 generator(seed * 7919u + uint32_t(rank));
  std::uniform_int_distribution<int> value(-bound, bound);
  std::vector<float> grads(layout.total, 0.0f);
  for (auto [offset, count] : layout.layers) {
    for (size_t i = 0; i < count; ++i) grads[offset + i] = float(value(generator));
  }
  return grads;
}

std::vector<float> reference_sum(const std::vector<float>& grads) {
  std::vector<float> sum(grads.size());
  MPI_Allreduce(grads.data(), sum.data(), int(grads.size()), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
  return sum;
}

enum class Order { kBackward, kShuffled, kForward };

// One step: marks every layer (in `order`; the same on every rank or not,
// it must not matter), then finishes.
void reduce_step(GradientReducer& reducer, const Layout& layout, Order order, uint32_t seed) {
  std::vector<std::pair<size_t, size_t>> layers = layout.layers;
  if (order == Order::kBackward) std::reverse(layers.begin(), layers.end());
  if (order == Order::kShuffled) std::shuffle(layers.begin(), layers.end(), std::mt19937(seed));
  reducer.begin_step();
  for (auto [offset, count] : layers) reducer.on_grads_ready(offset, count);
  reducer.finish();
}

void expect_equal(const std::vector<float>& got, const std::vector<float>& expected,
                  const std::string& what) {
  ASSERT_EQ(got.size(), expected.size());
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], expected[i]) << what << ": element " << i;
  }
}

const Layout& small_layout() {  // 6 layers, 448 elements with padding
  static const Layout layout = make_layout({7, 64, 1, 100, 33, 65});
  return layout;
}

const Layout& large_layout() {  // ~70k elements, one layer of 40k
  static const Layout layout = make_layout({3000, 17, 640, 1, 5000, 64, 999, 40000, 12000, 250});
  return layout;
}

TEST(GradientReducer, BucketsCoverTheBufferFromItsEnd) {
  Context ctx = test_context();
  std::vector<float> grads(1000);
  GradientReducer reducer(ctx, grads.data(), grads.size(),
                          {.bucket_bytes = 400, .first_bucket_bytes = 40});
  ASSERT_EQ(reducer.num_buckets(), 11u);  // 10 + 9 x 100 + 90
  EXPECT_EQ(reducer.bucket_range(0), std::make_pair(size_t(990), size_t(10)));
  EXPECT_EQ(reducer.bucket_range(1), std::make_pair(size_t(890), size_t(100)));
  EXPECT_EQ(reducer.bucket_range(10), std::make_pair(size_t(0), size_t(90)));
  size_t end = grads.size();
  for (size_t b = 0; b < reducer.num_buckets(); ++b) {
    auto [offset, count] = reducer.bucket_range(b);
    EXPECT_EQ(offset + count, end) << "bucket " << b;
    end = offset;
  }
  EXPECT_EQ(end, 0u);

  GradientReducer one(ctx, grads.data(), grads.size(), {});  // 1 MB first bucket holds it all
  ASSERT_EQ(one.num_buckets(), 1u);
  EXPECT_EQ(one.bucket_range(0), std::make_pair(size_t(0), size_t(1000)));
}

struct BucketCase {
  size_t bucket_bytes;
  size_t first_bucket_bytes;
};

void check_sums(const Layout& layout, const std::vector<BucketCase>& cases, bool hierarchical) {
  Context ctx = test_context();
  uint32_t seed = 1;
  for (const BucketCase& bucket : cases) {
    for (Order order : {Order::kBackward, Order::kShuffled, Order::kForward}) {
      for (size_t alignment : {kAlignment, size_t(1)}) {
        const std::string what = "bucket " + std::to_string(bucket.bucket_bytes) + " B, first " +
                                 std::to_string(bucket.first_bucket_bytes) + " B, order " +
                                 std::to_string(int(order)) + ", alignment " +
                                 std::to_string(alignment);
        std::vector<float> grads = integer_grads(layout, ++seed, ctx.world_rank());
        const std::vector<float> expected = reference_sum(grads);
        GradientReducer reducer(ctx, grads.data(), grads.size(),
                                {.bucket_bytes = bucket.bucket_bytes,
                                 .first_bucket_bytes = bucket.first_bucket_bytes,
                                 .hierarchical = hierarchical,
                                 .range_alignment = alignment});
        reduce_step(reducer, layout, order, seed + uint32_t(ctx.world_rank()));
        expect_equal(grads, expected, what);
        if (alignment == kAlignment) {  // every element marked: all start during "backward"
          EXPECT_EQ(reducer.last_buckets_started_early(), reducer.num_buckets()) << what;
        }
      }
    }
  }
}

const std::vector<BucketCase> kSmallCases = {
    {4, 4}, {60, 4}, {256, 64}, {1000, 256}, {1 << 20, 1 << 20}};
const std::vector<BucketCase> kLargeCases = {{4096, 1024}, {40000, 4096}, {25 << 20, 1 << 20}};

TEST(GradientReducer, FlatSumEqualsMpiAllreduce) {
  check_sums(small_layout(), kSmallCases, false);
  check_sums(large_layout(), kLargeCases, false);
}

TEST(GradientReducer, HierarchicalSumEqualsMpiAllreduce) {
  check_sums(small_layout(), kSmallCases, true);
  check_sums(large_layout(), kLargeCases, true);
}

// Real-valued gradients: flat and hierarchical (different summation orders)
// agree with a float64 sum within float rounding.
TEST(GradientReducer, HierarchicalMatchesFlatOnRealValues) {
  Context ctx = test_context();
  const size_t n = 50000;
  std::mt19937 generator(1234 + uint32_t(ctx.world_rank()));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> flat(n);
  for (float& g : flat) g = normal(generator);
  std::vector<float> hierarchical = flat;
  std::vector<double> exact(flat.begin(), flat.end());
  std::vector<double> magnitude(n);
  for (size_t i = 0; i < n; ++i) magnitude[i] = std::fabs(exact[i]);
  MPI_Allreduce(MPI_IN_PLACE, exact.data(), int(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, magnitude.data(), int(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  const ReducerOptions options{.bucket_bytes = 20000, .first_bucket_bytes = 4000};
  ReducerOptions tree = options;
  tree.hierarchical = true;
  GradientReducer flat_reducer(ctx, flat.data(), n, options);
  GradientReducer tree_reducer(ctx, hierarchical.data(), n, tree);
  for (GradientReducer* reducer : {&flat_reducer, &tree_reducer}) {
    reducer->begin_step();
    for (size_t end = n; end > 0; end -= std::min(end, size_t(3000))) {
      const size_t begin = end - std::min(end, size_t(3000));
      reducer->on_grads_ready(begin, end - begin);
    }
    reducer->finish();
  }
  const double eps = std::numeric_limits<float>::epsilon();
  for (size_t i = 0; i < n; ++i) {
    const double tolerance = 2 * eps * ctx.world_size() * magnitude[i] + 1e-30;
    ASSERT_NEAR(flat[i], exact[i], tolerance) << "flat, element " << i;
    ASSERT_NEAR(hierarchical[i], exact[i], tolerance) << "hierarchical, element " << i;
  }
}

// 16-bit messages: with integers of at most 256 / world size in magnitude,
// every partial sum is an integer of at most 256, exact in bf16 (8
// significant bits) and fp16, so the sums equal MPI_Allreduce's exactly.
TEST(GradientReducer, HalfWireSumsSmallIntegersExactly) {
  Context ctx = test_context();
  const Layout& layout = large_layout();
  const int bound = 256 / ctx.world_size();
  for (HalfWire wire : {HalfWire::kBf16, HalfWire::kFp16}) {
    for (bool hierarchical : {false, true}) {
      const std::string what = std::string(wire == HalfWire::kBf16 ? "bf16" : "fp16") +
                               (hierarchical ? ", hierarchical" : ", flat");
      std::vector<float> grads(layout.total);
      GradientReducer reducer(ctx, grads.data(), grads.size(),
                              {.bucket_bytes = 16384,
                               .first_bucket_bytes = 2048,
                               .hierarchical = hierarchical,
                               .half_wire = wire});
      for (uint32_t step = 0; step < 2; ++step) {
        const std::vector<float> fresh = integer_grads(layout, 300 + step, ctx.world_rank(), bound);
        std::copy(fresh.begin(), fresh.end(), grads.begin());
        const std::vector<float> expected = reference_sum(grads);
        reduce_step(reducer, layout, Order::kBackward, step);
        expect_equal(grads, expected, what + ", step " + std::to_string(step));
      }
    }
  }
}

// 16-bit messages, real values: every rank ends with the same bits, each a
// value of the 16-bit type (the sender keeps what it sent), within the
// rounding of W partial sums of the exact sum: W x u x sum |g|, u = 2^-8 for
// bf16 and 2^-11 for fp16.
TEST(GradientReducer, HalfWireRealValuesAreTheSameOnEveryRank) {
  Context ctx = test_context();
  if (ctx.world_size() < 2) GTEST_SKIP() << "needs two ranks";
  const size_t n = 50000;
  for (HalfWire wire : {HalfWire::kBf16, HalfWire::kFp16}) {
    for (bool hierarchical : {false, true}) {
      const std::string what = std::string(wire == HalfWire::kBf16 ? "bf16" : "fp16") +
                               (hierarchical ? ", hierarchical" : ", flat");
      std::mt19937 generator(99 + uint32_t(ctx.world_rank()));
      std::normal_distribution<float> normal(0.0f, 1.0f);
      std::vector<float> grads(n);
      for (float& g : grads) g = normal(generator);
      std::vector<double> exact(grads.begin(), grads.end());
      std::vector<double> magnitude(n);
      for (size_t i = 0; i < n; ++i) magnitude[i] = std::fabs(exact[i]);
      MPI_Allreduce(MPI_IN_PLACE, exact.data(), int(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      MPI_Allreduce(MPI_IN_PLACE, magnitude.data(), int(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
      GradientReducer reducer(ctx, grads.data(), n,
                              {.bucket_bytes = 20000,
                               .first_bucket_bytes = 4000,
                               .hierarchical = hierarchical,
                               .half_wire = wire});
      reducer.begin_step();
      reducer.on_grads_ready(0, n);
      reducer.finish();

      // Every rank checks all its values, then all ranks fail together: a
      // rank that left the test early would leave the others in its
      // collectives.
      std::vector<float> rank0 = grads;
      MPI_Bcast(rank0.data(), int(n), MPI_FLOAT, 0, MPI_COMM_WORLD);
      const double u = wire == HalfWire::kBf16 ? 0x1p-8 : 0x1p-11;
      long bad = 0;
      std::string first;
      for (size_t i = 0; i < n; ++i) {
        const bool is_16_bit = wire == HalfWire::kBf16
                                   ? (std::bit_cast<uint32_t>(grads[i]) & 0xffffu) == 0
                                   : float(static_cast<_Float16>(grads[i])) == grads[i];
        const double error = std::fabs(double(grads[i]) - exact[i]);
        std::string problem = grads[i] != rank0[i] ? "differs from rank 0's"
                              : !is_16_bit         ? "is not a 16-bit value"
                              : error > ctx.world_size() * u * magnitude[i]
                                  ? "is " + std::to_string(error) + " from the exact sum"
                                  : "";
        if (!problem.empty() && bad++ == 0) {
          first = "element " + std::to_string(i) + " = " + std::to_string(grads[i]) + " " + problem;
        }
      }
      long bad_anywhere = bad;
      MPI_Allreduce(MPI_IN_PLACE, &bad_anywhere, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
      ASSERT_EQ(bad_anywhere, 0) << what << ", " << bad << " wrong on this rank; " << first;
    }
  }
}

TEST(GradientReducer, ReusedOverSteps) {
  Context ctx = test_context();
  const Layout& layout = large_layout();
  std::vector<float> grads(layout.total);
  for (bool hierarchical : {false, true}) {
    GradientReducer reducer(
        ctx, grads.data(), grads.size(),
        {.bucket_bytes = 16384, .first_bucket_bytes = 2048, .hierarchical = hierarchical});
    for (uint32_t step = 0; step < 3; ++step) {
      const std::vector<float> fresh = integer_grads(layout, 100 + step, ctx.world_rank());
      std::copy(fresh.begin(), fresh.end(), grads.begin());  // the reducer keeps grads.data()
      const std::vector<float> expected = reference_sum(grads);
      reduce_step(reducer, layout, Order::kBackward, step);
      expect_equal(grads, expected, "step " + std::to_string(step));
      EXPECT_GE(reducer.last_wait_seconds(), 0.0);
    }
  }
}

// record_timeline: every bucket of a step, its bytes as the plan cuts it,
// ready <= start <= end within the step, starts in bucket order; none kept
// without it.
TEST(GradientReducer, TimelineOfAStep) {
  Context ctx = test_context();
  const Layout& layout = large_layout();
  std::vector<float> grads = integer_grads(layout, 7, ctx.world_rank());
  for (bool hierarchical : {false, true}) {
    GradientReducer reducer(ctx, grads.data(), grads.size(),
                            {.bucket_bytes = 16384,
                             .first_bucket_bytes = 2048,
                             .hierarchical = hierarchical,
                             .record_timeline = true});
    const auto before = std::chrono::steady_clock::now();
    reduce_step(reducer, layout, Order::kBackward, 3);
    const auto after = std::chrono::steady_clock::now();
    expect_step_timeline(reducer, before, after);
  }
  GradientReducer plain(ctx, grads.data(), grads.size(), {});
  reduce_step(plain, layout, Order::kBackward, 3);
  EXPECT_TRUE(plain.last_timeline().empty());
}

// While finish() waits for a rank that is late to mark its layers, the
// communication thread polls with sleeps between: it must not spin. Rank 0
// waits about 0.4 s; a spinning thread would use about that much CPU time.
// The polls, up to 50 us apart, each with its wake-up and MPI_Testsome, cost
// 0.086-0.089 s of it over shared memory and 0.101 s over TCP between the
// emulated nodes (2-vCPU AMD EPYC, 2026-12-07): a quarter of the wait, so the
// bound is half of it, twice that and half a spin's.
TEST(GradientReducer, WaitingForALateRankDoesNotSpin) {
  Context ctx = test_context();
  if (ctx.world_size() < 2) GTEST_SKIP() << "needs two ranks";
  const Layout& layout = large_layout();
  std::vector<float> grads = integer_grads(layout, 5, ctx.world_rank());
  const std::vector<float> expected = reference_sum(grads);
  GradientReducer reducer(ctx, grads.data(), grads.size(),
                          {.bucket_bytes = 16384, .first_bucket_bytes = 2048});
  reducer.begin_step();
  if (ctx.world_rank() == ctx.world_size() - 1) {
    std::this_thread::sleep_for(std::chrono::milliseconds(400));
  }
  for (auto [offset, count] : layout.layers) reducer.on_grads_ready(offset, count);
  reducer.finish();
  expect_equal(grads, expected, "late rank");
  if (ctx.world_rank() == 0) {
    ASSERT_GT(reducer.last_wait_seconds(), 0.2);
    EXPECT_LT(reducer.last_comm_cpu_seconds(), 0.5 * reducer.last_wait_seconds())
        << "the communication thread used " << reducer.last_comm_cpu_seconds()
        << " s of CPU while finish() waited " << reducer.last_wait_seconds() << " s";
  }
}

// Until finish() the communication thread runs under SCHED_BATCH (its polls
// do not preempt backward's thread on a busy core), and under SCHED_OTHER
// again once finish() waits. The other ranks look, before and while they
// wait in finish(), as the last rank, a second late to mark its layers,
// keeps their buckets in flight.
TEST(GradientReducer, BatchSchedulingUntilFinish) {
  Context ctx = test_context();
  if (ctx.world_size() < 2) GTEST_SKIP() << "needs two ranks";
  const auto batch_threads = [] {
    int count = 0;
    for (const ThreadScheduling& thread : thread_scheduling())
      count += thread.policy == SCHED_BATCH;
    return count;
  };
  const Layout& layout = large_layout();
  std::vector<float> grads = integer_grads(layout, 9, ctx.world_rank());
  const std::vector<float> expected = reference_sum(grads);
  GradientReducer reducer(
      ctx, grads.data(), grads.size(),
      {.bucket_bytes = 16384, .first_bucket_bytes = 2048, .range_alignment = kAlignment});
  const int before = batch_threads();
  reducer.begin_step();
  const bool late = ctx.world_rank() == ctx.world_size() - 1;
  if (late) std::this_thread::sleep_for(std::chrono::seconds(1));
  for (auto [offset, count] : layout.layers) reducer.on_grads_ready(offset, count);
  int during = 0;
  // The thread starts on the first bucket handed out; its ring cannot end
  // before the late rank marks its layers.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(800);
  while (!late && during == 0 && std::chrono::steady_clock::now() < deadline) {
    during = batch_threads();
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // Half a second into finish(), while the late rank still sleeps.
  int in_finish = -1;
  std::thread observer;
  if (!late) {
    observer = std::thread([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(500));
      in_finish = batch_threads();
    });
  }
  reducer.finish();
  if (observer.joinable()) observer.join();
  expect_equal(grads, expected, "late rank");
  EXPECT_EQ(before, 0);
  if (!late) {
    EXPECT_EQ(during, 1) << "threads under SCHED_BATCH while buckets were in flight";
    EXPECT_EQ(in_finish, 0) << "threads under SCHED_BATCH while finish() waited";
  }
  EXPECT_EQ(batch_threads(), 0) << "after finish()";
}

// Without range_alignment the padding after a layer is never marked, so the
// first bucket holding padding waits for finish(), and the buckets after it
// wait too (they start in order); the sum is still complete.
TEST(GradientReducer, UnmarkedPaddingDefersBucketsToFinish) {
  Context ctx = test_context();
  const Layout layout = make_layout({100, 100, 100, 100});  // 28 padding after each
  std::vector<float> grads = integer_grads(layout, 9, ctx.world_rank());
  const std::vector<float> expected = reference_sum(grads);
  GradientReducer reducer(ctx, grads.data(), grads.size(),
                          {.bucket_bytes = 64 * 4, .first_bucket_bytes = 64 * 4});
  ASSERT_EQ(reducer.num_buckets(), 8u);
  reducer.begin_step();
  for (auto it = layout.layers.rbegin(); it != layout.layers.rend(); ++it) {
    reducer.on_grads_ready(it->first, it->second);
  }
  reducer.finish();
  EXPECT_EQ(reducer.last_buckets_started_early(), 0u);  // bucket 0 ends in padding
  expect_equal(grads, expected, "unmarked padding");
}

// A layout padded to whole pieces of world size x 64 elements, as the
// parameter store pads itself for the sharded optimizer.
Layout sharded_layout(const Layout& layout, int world_size) {
  Layout padded = layout;
  const size_t granule = size_t(world_size) * kAlignment;
  padded.total = (layout.total + granule - 1) / granule * granule;
  return padded;
}

TEST(GradientReducer, ShardedSumsEqualMpiAllreduceOnEachRanksPiecesAndGatherRestoresAll) {
  Context ctx = test_context();
  const size_t rank = size_t(ctx.world_rank());
  uint32_t seed = 50;
  for (const Layout& base : {small_layout(), large_layout()}) {
    const Layout layout = sharded_layout(base, ctx.world_size());
    for (const BucketCase& bucket : {BucketCase{4, 4}, BucketCase{1000, 256},
                                     BucketCase{40000, 4096}, BucketCase{1 << 20, 1 << 20}}) {
      std::vector<float> grads(layout.total);
      GradientReducer reducer(ctx, grads.data(), grads.size(),
                              {.bucket_bytes = bucket.bucket_bytes,
                               .first_bucket_bytes = bucket.first_bucket_bytes,
                               .range_alignment = kAlignment,
                               .shard = true});
      ASSERT_EQ(reducer.plan().shards(), size_t(ctx.world_size()));
      for (Order order : {Order::kBackward, Order::kShuffled}) {
        const std::vector<float> fresh = integer_grads(layout, ++seed, ctx.world_rank());
        std::copy(fresh.begin(), fresh.end(), grads.begin());
        const std::vector<float> expected = reference_sum(grads);
        reduce_step(reducer, layout, order, seed);
        const std::string what = "bucket " + std::to_string(bucket.bucket_bytes) + " B, " +
                                 std::to_string(layout.total) + " elements";
        size_t owned = 0;
        for (const BucketPlan::ShardPiece& piece : reducer.plan().shard_pieces(rank)) {
          for (size_t i = piece.offset; i < piece.offset + piece.count; ++i) {
            ASSERT_EQ(grads[i], expected[i]) << what << ": element " << i;
          }
          owned += piece.count;
        }
        EXPECT_EQ(owned, layout.total / size_t(ctx.world_size())) << what;

        // The all-gather: this rank's pieces hold -expected, the rest NaN.
        std::vector<float> params(layout.total, std::nanf(""));
        for (const BucketPlan::ShardPiece& piece : reducer.plan().shard_pieces(rank)) {
          for (size_t i = piece.offset; i < piece.offset + piece.count; ++i) {
            params[i] = -expected[i];
          }
        }
        reducer.gather_parameters(params.data());
        for (size_t i = 0; i < layout.total; ++i) {
          ASSERT_EQ(params[i], -expected[i]) << what << ": gathered element " << i;
        }
      }
    }
  }
  std::vector<float> grads(64 * ctx.world_size() + 64);
  if (ctx.world_size() > 1) {  // not whole pieces of world size x 64
    EXPECT_THROW(GradientReducer(ctx, grads.data(), grads.size(),
                                 {.range_alignment = kAlignment, .shard = true}),
                 Error);
  }
  try {
    GradientReducer(ctx, grads.data(), 64 * ctx.world_size(),
                    {.hierarchical = true, .range_alignment = kAlignment, .shard = true});
    ADD_FAILURE() << "sharded and hierarchical accepted";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
  }
}

TEST(GradientReducer, EmptyBuffer) {
  Context ctx = test_context();
  GradientReducer reducer(ctx, nullptr, 0, {});
  EXPECT_EQ(reducer.num_buckets(), 0u);
  reducer.begin_step();
  reducer.on_grads_ready(0, 0);
  reducer.finish();
}

TEST(GradientReducer, MisuseIsReported) {
  Context ctx = test_context();
  std::vector<float> grads(256, 1.0f);
  EXPECT_THROW(GradientReducer(ctx, grads.data(), grads.size(), {.bucket_bytes = 2}), Error);
  EXPECT_THROW(GradientReducer(ctx, nullptr, 10, {}), Error);
  GradientReducer reducer(ctx, grads.data(), grads.size(),
                          {.bucket_bytes = 128, .first_bucket_bytes = 128});
  EXPECT_THROW(reducer.on_grads_ready(0, 10), Error);  // before begin_step
  EXPECT_THROW(reducer.finish(), Error);
  reducer.begin_step();
  EXPECT_THROW(reducer.begin_step(), Error);
  EXPECT_THROW(reducer.on_grads_ready(250, 7), Error);  // past the end
  reducer.on_grads_ready(100, 50);
  try {
    reducer.on_grads_ready(140, 20);  // overlaps [100, 150)
    ADD_FAILURE() << "overlapping range accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("[140, 160) was already marked ready"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(reducer.on_grads_ready(90, 20), Error);  // overlaps from below
  reducer.finish();                                     // the step still completes, with the sum
  EXPECT_EQ(grads[0], float(ctx.world_size()));
  EXPECT_EQ(grads[255], float(ctx.world_size()));
}

}  // namespace
}  // namespace mpiasr::mpi

#include "tests/mpi/mpi_test_main.h"
