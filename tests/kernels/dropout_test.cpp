// Philox4x32-10 against the known-answer vectors of Random123 (tests/kat_vectors),
// the layout of the dropout stream, and dropout built on it: the mask depends only on (seed, offset
// + i), so it is the same for any thread count and any split of a tensor; the keep rate matches 1 -
// p; kept values are scaled by 1 / (1 - p); the backward pass applies the same mask.
#include "kernels/philox.h"

#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "src/base/error.h"
#include "tests/kernels/gradient_check.h"

namespace mpiasr {
namespace {

TEST(Philox, MatchesRandom123KnownAnswers) {
  struct Case {
    uint32_t ctr[4], key[2], expected[4];
  };
  const Case cases[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Case& c : cases) {
    const Philox4x32Block out =
        philox4x32_10(c.ctr[0], c.ctr[1], c.ctr[2], c.ctr[3], c.key[0], c.key[1]);
    for (int i = 0; i < 4; ++i) EXPECT_EQ(out.v[i], c.expected[i]) << "word " << i;
  }
}

TEST(Philox, DropoutBitsAreTheHalvesOfTheBlockWords) {
  const uint64_t seed = 0x0123456789abcdefull;
  for (uint64_t index : {0ull, 1ull, 6ull, 13ull, 0x8'0000'0003ull}) {
    const uint64_t block = index / 8;
    const Philox4x32Block b =
        philox4x32_10(uint32_t(block), uint32_t(block >> 32), 0, 0, 0x89abcdefu, 0x01234567u);
    const uint32_t word = b.v[(index / 2) % 4];
    EXPECT_EQ(dropout_bits(seed, index), index % 2 ? word >> 16 : word & 0xffffu) << index;
  }
  uint32_t bits[8];
  dropout_block_bits(seed, 5, bits);
  for (int e = 0; e < 8; ++e) EXPECT_EQ(bits[e], dropout_bits(seed, 40 + e)) << e;
  EXPECT_EQ(dropout_threshold(0.0f), 0u);
  EXPECT_EQ(dropout_threshold(0.1f), 6554u);  // ceil(0.1 * 65536) = ceil(6553.6)
  EXPECT_EQ(dropout_threshold(0.5f), 32768u);
  EXPECT_EQ(dropout_threshold(1.0f), 65536u);
}

std::vector<float> dropout(int threads, const std::vector<float>& x, float p, uint64_t seed,
                           uint64_t offset) {
  CpuBackend<float> backend(threads);
  std::vector<float> out(x.size());
  backend.dropout_forward(out.data(), x.data(), p, seed, offset, x.size());
  return out;
}

TEST(Dropout, SameMaskForAnyThreadCountAndSplit) {
  const size_t n = 100003;  // not a multiple of 4
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) x[i] = 1.0f + float(i % 7);
  const uint64_t seed = 42, offset = 5;  // offset not a multiple of 4
  const auto one = dropout(1, x, 0.1f, seed, offset);
  EXPECT_EQ(dropout(2, x, 0.1f, seed, offset), one);
  // The tail of a tensor dropped with offset 5 + 1001 is the tail of the whole.
  const std::vector<float> tail(x.begin() + 1001, x.end());
  const auto tail_out = dropout(2, tail, 0.1f, seed, offset + 1001);
  EXPECT_TRUE(std::equal(tail_out.begin(), tail_out.end(), one.begin() + 1001));
  // Each element follows dropout_keep.
  for (size_t i = 0; i < n; i += 97) {
    EXPECT_EQ(one[i] != 0.0f, dropout_keep(seed, offset + i, 0.1f)) << i;
  }
  EXPECT_NE(dropout(1, x, 0.1f, seed + 1, offset), one);
}

TEST(Dropout, KeepRateAndScale) {
  const size_t n = 1000000;
  const std::vector<float> x(n, 1.0f);
  for (float p : {0.1f, 0.5f}) {
    const auto out = dropout(2, x, p, 7, 0);
    size_t kept = 0;
    for (float v : out) {
      if (v != 0.0f) {
        ++kept;
        EXPECT_EQ(v, 1.0f / (1.0f - p));
      }
    }
    EXPECT_NEAR(double(kept) / n, 1.0 - p, 0.01) << "p=" << p;
  }
}

TEST(Dropout, ZeroProbabilityCopiesAndOneZeroes) {
  const std::vector<float> x = {1.5f, -2.0f, 3.0f};
  EXPECT_EQ(dropout(1, x, 0.0f, 3, 0), x);
  EXPECT_EQ(dropout(1, x, 1.0f, 3, 0), std::vector<float>(3, 0.0f));
  EXPECT_THROW(dropout(1, x, 1.5f, 3, 0), Error);
}

TEST(Dropout, BackwardAppliesTheSameMask) {
  const size_t n = 5000;
  std::mt19937_64 rng(51);
  const auto x = testing::random_vector(n, rng), g = testing::random_vector(n, rng);
  CpuBackend<double> backend(2);
  std::vector<double> out(n), dx(n);
  backend.dropout_forward(out.data(), x.data(), 0.3f, 9, 11, n);
  backend.dropout_backward(dx.data(), g.data(), 0.3f, 9, 11, n);
  for (size_t i = 0; i < n; ++i) {
    // d out[i] / d x[i] is the same factor (0 or 1 / (1 - p)) for both.
    EXPECT_DOUBLE_EQ(dx[i] * x[i], out[i] * g[i]) << i;
  }
}

TEST(Dropout, BackwardMatchesFiniteDifferences) {
  const size_t n = 64;
  std::mt19937_64 rng(52);
  auto x = testing::random_vector(n, rng);
  const auto g = testing::random_vector(n, rng);
  CpuBackend<double> backend(1);
  std::vector<double> out(n), dx(n);
  auto loss = [&] {
    backend.dropout_forward(out.data(), x.data(), 0.25f, 4, 3, n);
    return testing::dot(g, out);
  };
  backend.dropout_backward(dx.data(), g.data(), 0.25f, 4, 3, n);
  EXPECT_LT(testing::relative_error(dx, testing::numeric_gradient(x, loss)),
            testing::kGradTolerance);
}

}  // namespace
}  // namespace mpiasr
