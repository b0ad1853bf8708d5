// BucketPlan against a brute-force model: the buckets tile the buffer from its
// end with the first bucket F elements and the others B; after any sequence
// of marks a bucket has been handed out exactly when it and every bucket
// before it are fully marked (the model keeps one flag per element, the end
// of each mark rounded up to the alignment); end_step hands out the rest; and
// misuse throws naming the reducer. Sharded (ZeRO-1): every bucket is a
// multiple of shards x alignment, its W pieces tile it in rank order, and each
// rank's pieces fill its compact storage [0, count / W) in order, one after
// the other; a buffer that cannot be cut so is refused.
#include "mpi/bucket_plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "src/base/error.h"

namespace mpiasr::mpi {
namespace {

// [begin, end) of every bucket, walking down from the end of the buffer.
std::vector<std::pair<size_t, size_t>> expected_buckets(size_t count, size_t first, size_t rest) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t end = count;
  while (end > 0) {
    const size_t size = out.empty() ? first : rest;
    const size_t begin = end > size ? end - size : 0;
    out.push_back({begin, end - begin});
    end = begin;
  }
  return out;
}

TEST(BucketPlan, BucketsTileTheBufferFromItsEnd) {
  for (size_t count : {0, 1, 7, 64, 1000, 1001}) {
    for (size_t first : {1, 3, 64, 5000}) {
      for (size_t rest : {1, 10, 100, 4096}) {
        const BucketPlan plan(count, rest * 4, first * 4, 1, "Reducer");
        const auto expected = expected_buckets(count, first, rest);
        ASSERT_EQ(plan.num_buckets(), expected.size()) << count << " " << first << " " << rest;
        for (size_t b = 0; b < expected.size(); ++b) EXPECT_EQ(plan.bucket_range(b), expected[b]);
      }
    }
  }
}

// Layers of random sizes, padded to the alignment like a ParameterStore, marked
// in random order, one range per layer (the padding left unmarked).
TEST(BucketPlan, BucketsStartInOrderExactlyWhenCompletelyMarked) {
  std::mt19937 random(11);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t alignment = trial % 3 == 0 ? 1 : 16;
    std::vector<std::pair<size_t, size_t>> layers;  // offset, count
    size_t total = 0;
    const int layer_count = 1 + int(random() % 12);
    for (int l = 0; l < layer_count; ++l) {
      const size_t size = 1 + random() % 60;
      layers.push_back({total, size});
      total += (size + alignment - 1) / alignment * alignment;
    }
    const size_t first = 1 + random() % 40, rest = 1 + random() % 80;
    BucketPlan plan(total, rest * 4, first * 4, alignment, "Reducer");
    const auto buckets = expected_buckets(total, first, rest);
    std::shuffle(layers.begin(), layers.end(), random);

    for (int step = 0; step < 2; ++step) {
      plan.begin_step();
      std::vector<bool> marked(total, false);
      std::vector<size_t> handed_out;
      for (const auto& [offset, count] : layers) {
        plan.mark_ready(offset, count);
        const size_t end =
            std::min(total, (offset + count + alignment - 1) / alignment * alignment);
        for (size_t i = offset; i < end; ++i) marked[i] = true;
        while (const auto b = plan.next_to_start()) handed_out.push_back(*b);
        size_t complete_prefix = 0;
        while (complete_prefix < buckets.size()) {
          const auto [begin, size] = buckets[complete_prefix];
          if (!std::all_of(marked.begin() + long(begin), marked.begin() + long(begin + size),
                           [](bool m) { return m; })) {
            break;
          }
          ++complete_prefix;
        }
        ASSERT_EQ(handed_out.size(), complete_prefix) << "trial " << trial;
        ASSERT_EQ(plan.started(), complete_prefix);
      }
      plan.end_step();
      while (const auto b = plan.next_to_start()) handed_out.push_back(*b);
      std::vector<size_t> in_order(buckets.size());
      std::iota(in_order.begin(), in_order.end(), 0);
      EXPECT_EQ(handed_out, in_order) << "trial " << trial;
    }
  }
}

TEST(BucketPlan, ShardsCutEveryBucketIntoEqualPiecesThatFillEachRanksStorage) {
  for (size_t shards : {1, 2, 3, 4, 7}) {
    for (size_t alignment : {1, 64}) {
      const size_t granule = shards * alignment;
      for (size_t granules : {0, 1, 2, 5, 40, 41}) {
        const size_t count = granules * granule;
        // F and B that are not multiples of the granule: rounded up when sharded.
        const size_t first = granule + 1, rest = 3 * granule - 1;
        const BucketPlan plan(count, rest * 4, first * 4, alignment, "Reducer", shards);
        ASSERT_EQ(plan.shards(), shards);
        ASSERT_EQ(plan.shard_elements(), count / shards);
        const auto expected = shards > 1 ? expected_buckets(count, 2 * granule, 3 * granule)
                                         : expected_buckets(count, first, rest);
        ASSERT_EQ(plan.num_buckets(), expected.size()) << count;
        std::vector<int> owner(count, -1);
        for (size_t b = 0; b < expected.size(); ++b) {
          ASSERT_EQ(plan.bucket_range(b), expected[b]);
          const auto [begin, size] = expected[b];
          EXPECT_TRUE(shards == 1 || size % granule == 0) << "bucket " << b;
          for (size_t r = 0; r < shards; ++r) {
            const BucketPlan::ShardPiece piece = plan.shard_piece(b, r);
            EXPECT_EQ(piece.offset, begin + r * size / shards);
            EXPECT_EQ(piece.count, size / shards);
            EXPECT_TRUE(shards == 1 || piece.offset % alignment == 0) << piece.offset;
            for (size_t i = piece.offset; i < piece.offset + piece.count; ++i) {
              ASSERT_EQ(owner[i], -1) << "element " << i << " in two pieces";
              owner[i] = int(r);
            }
          }
        }
        EXPECT_TRUE(std::none_of(owner.begin(), owner.end(), [](int r) { return r < 0; }));
        for (size_t r = 0; r < shards; ++r) {
          size_t state_end = 0, offset_end = 0;
          for (const BucketPlan::ShardPiece& piece : plan.shard_pieces(r)) {
            EXPECT_EQ(piece.state_offset, state_end) << "shard " << r;
            EXPECT_GE(piece.offset, offset_end);
            for (size_t i = piece.offset; i < piece.offset + piece.count; ++i) {
              ASSERT_EQ(owner[i], int(r));
            }
            state_end += piece.count;
            offset_end = piece.offset + piece.count;
          }
          EXPECT_EQ(state_end, count / shards);
        }
      }
    }
  }
  try {
    BucketPlan(3 * 64 + 64, 400, 40, 64, "ShardedReducer", 3);
    FAIL() << "a buffer that is not whole pieces was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("ShardedReducer: a buffer of 256 elements cannot be cut "
                                         "into 3 shards of whole 64-element pieces"),
              std::string::npos)
        << e.what();
  }
}

TEST(BucketPlan, MisuseThrowsNamingTheReducer) {
  auto message = [](auto&& call) {
    try {
      call();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  BucketPlan plan(100, 40, 40, 8, "SomeReducer");
  EXPECT_NE(message([&] {
              plan.mark_ready(0, 1);
            }).find("SomeReducer::on_grads_ready called outside begin_step()/finish()"),
            std::string::npos);
  EXPECT_NE(
      message([&] { plan.end_step(); }).find("SomeReducer::finish called without begin_step()"),
      std::string::npos);
  plan.begin_step();
  EXPECT_NE(message([&] {
              plan.begin_step();
            }).find("SomeReducer::begin_step called again before finish()"),
            std::string::npos);
  EXPECT_NE(message([&] { plan.mark_ready(90, 11); }).find("[90, 101) is outside [0, 100)"),
            std::string::npos);
  plan.mark_ready(10, 3);  // marks [10, 16) with the alignment
  EXPECT_NE(message([&] { plan.mark_ready(15, 1); }).find("already marked ready in part"),
            std::string::npos);
  EXPECT_NE(message([&] { plan.mark_ready(4, 7); }).find("already marked ready in part"),
            std::string::npos);
  plan.mark_ready(16, 0);
  plan.mark_ready(16, 4);
  plan.end_step();
  EXPECT_THROW(BucketPlan(10, 2, 40, 1, "R"), Error);
  EXPECT_THROW(BucketPlan(10, 40, 3, 1, "R"), Error);
  EXPECT_THROW(BucketPlan(10, 40, 40, 0, "R"), Error);
}

}  // namespace
}  // namespace mpiasr::mpi

#include "tests/mpi/mpi_test_main.h"
