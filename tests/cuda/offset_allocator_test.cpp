// The device arena's bookkeeping (kernels/cuda/offset_allocator.h), which needs
// no GPU: alignment, first fit, merging of freed neighbours, exhaustion and
// bad releases, and a random sequence checked against a byte map for overlaps.
#include "kernels/cuda/offset_allocator.h"

#include <gtest/gtest.h>

#include <map>
#include <random>
#include <vector>

#include "src/base/error.h"

namespace mpiasr {
namespace {

constexpr size_t kA = OffsetAllocator::kAlignment;

TEST(OffsetAllocator, AlignsEveryRangeAndCountsBytes) {
  OffsetAllocator allocator(10 * kA + 100);  // capacity rounds down to 10 kA
  EXPECT_EQ(allocator.capacity(), 10 * kA);
  const size_t a = allocator.allocate(1);
  const size_t b = allocator.allocate(0);
  const size_t c = allocator.allocate(kA + 1);
  EXPECT_EQ(a, 0u);
  EXPECT_EQ(b, kA);
  EXPECT_EQ(c, 2 * kA);
  EXPECT_EQ(allocator.used(), 4 * kA);
  EXPECT_EQ(allocator.largest_free(), 6 * kA);
  allocator.release(b);
  EXPECT_EQ(allocator.used(), 3 * kA);
  EXPECT_EQ(allocator.peak(), 4 * kA);
  EXPECT_EQ(allocator.allocations(), 2u);
}

TEST(OffsetAllocator, FirstFitAndMergingOfFreedNeighbours) {
  OffsetAllocator allocator(8 * kA);
  const size_t a = allocator.allocate(2 * kA);
  const size_t b = allocator.allocate(2 * kA);
  const size_t c = allocator.allocate(2 * kA);
  allocator.release(a);
  EXPECT_EQ(allocator.allocate(kA), a);  // the first hole that fits
  allocator.release(a);
  allocator.release(c);
  allocator.release(b);  // merges with a's hole before and c's after
  EXPECT_EQ(allocator.largest_free(), 8 * kA);
  EXPECT_EQ(allocator.allocate(8 * kA), 0u);
}

TEST(OffsetAllocator, ExhaustionAndBadReleasesAreErrors) {
  OffsetAllocator allocator(4 * kA);
  allocator.allocate(3 * kA);
  try {
    allocator.allocate(2 * kA);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("device arena exhausted: 512 bytes requested"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(allocator.release(kA), Error);
  EXPECT_THROW(allocator.release(3 * kA), Error);
}

TEST(OffsetAllocator, RandomSequenceNeverOverlaps) {
  const size_t capacity = 256 * kA;
  OffsetAllocator allocator(capacity);
  std::vector<int> owner(capacity / kA, -1);  // which allocation holds each unit
  std::map<size_t, size_t> live;              // offset -> units
  std::mt19937_64 rng(7);
  for (int i = 0; i < 5000; ++i) {
    const bool allocate = live.empty() || rng() % 3 != 0;
    if (allocate) {
      const size_t bytes = rng() % (12 * kA);
      size_t offset = 0;
      try {
        offset = allocator.allocate(bytes);
      } catch (const Error&) {
        continue;  // full: fine, as long as nothing overlaps
      }
      ASSERT_EQ(offset % kA, 0u);
      const size_t units = std::max<size_t>(1, (bytes + kA - 1) / kA);
      ASSERT_LE(offset / kA + units, owner.size());
      for (size_t u = offset / kA; u < offset / kA + units; ++u) {
        ASSERT_EQ(owner[u], -1) << "unit " << u << " handed out twice";
        owner[u] = i;
      }
      live[offset] = units;
    } else {
      auto it = live.begin();
      std::advance(it, rng() % live.size());
      allocator.release(it->first);
      for (size_t u = it->first / kA; u < it->first / kA + it->second; ++u) owner[u] = -1;
      live.erase(it);
    }
  }
  for (const auto& [offset, units] : live) allocator.release(offset);
  EXPECT_EQ(allocator.used(), 0u);
  EXPECT_EQ(allocator.largest_free(), capacity);
}

}  // namespace
}  // namespace mpiasr
