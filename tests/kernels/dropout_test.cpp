// Philox4x32-10 against the known-answer vectors of Random123 (tests/kat_vectors),
// the layout of the dropout stream, and dropout built on it: the mask depends only on (seed, offset
// + i), so it is the same for any thread count and any split of a tensor; the keep rate matches 1 -
// p; kept values are scaled by 1 / (1 - p); a residual branch's gradient applies the same mask as
// its forward sum, against central differences.
#include "kernels/philox.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <random>
#include <vector>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/dropout.h"
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
  // The gradient of a residual branch with scale 1 is the dropout of the incoming gradient.
  CpuBackend<float> backend(threads);
  std::vector<float> out(x.size());
  backend.residual_dropout_backward(out.data(), x.data(), 1.0f, p, seed, offset, x.size());
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

// Every element of a long stretch, far into the stream (block counters above
// 2^32) with both halves of the seed set, against the scalar dropout_keep; two
// thresholds check the bits themselves, not only one comparison. This covers
// the tile generator the processor runs (AVX2 where it has it).
TEST(Dropout, EveryElementFollowsTheScalarStream) {
  const size_t n = 4099;
  const std::vector<float> x(n, 1.0f);
  const uint64_t seed = 0x0123456789abcdefull, offset = (uint64_t(1) << 35) + 3;
  for (float p : {0.3f, 0.7f}) {
    const auto out = dropout(1, x, p, seed, offset);
    size_t mismatches = 0;
    for (size_t i = 0; i < n; ++i)
      mismatches += (out[i] != 0.0f) != dropout_keep(seed, offset + i, p);
    EXPECT_EQ(mismatches, 0u) << "p = " << p;
  }
}

// Each tile generator this processor runs (AVX-512, AVX2, portable) against
// the scalar stream, bit for bit: tiles near 0, across the 2^32 block
// boundary of the counter's low word, and far into the stream, with both
// halves of the seed set.
TEST(Dropout, EveryTileGeneratorDrawsTheScalarStream) {
  const std::vector<DropoutTileGenerator> generators = dropout_tile_generators();
  ASSERT_FALSE(generators.empty());
  EXPECT_STREQ(generators.back().name, "portable");
  const uint64_t blocks_per_tile = kDropoutTileElements / kDropoutElementsPerBlock;
  const uint64_t boundary = (uint64_t(1) << 32) / blocks_per_tile;  // first tile past 2^32 blocks
  std::vector<uint32_t> bits(kDropoutTileElements);
  for (const DropoutTileGenerator& generator : generators) {
    for (uint64_t seed : {uint64_t(0), uint64_t(7), uint64_t(0x0123456789abcdefull)}) {
      for (uint64_t tile : {uint64_t(0), uint64_t(1), boundary - 1, boundary, uint64_t(1) << 40}) {
        generator.draw(bits.data(), seed, tile);
        size_t mismatches = 0;
        for (int e = 0; e < kDropoutTileElements; ++e)
          mismatches += bits[size_t(e)] != dropout_bits(seed, tile * kDropoutTileElements + e);
        EXPECT_EQ(mismatches, 0u) << generator.name << ", seed " << seed << ", tile " << tile;
      }
    }
  }
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

// The one-pass ops against the passes they replace, bit for bit: Swish then
// dropout, dropout then Swish's gradient, and dropout then the branch's
// scale; at p = 0, 1 and two rates between, on 1 and 2 threads, from an
// offset inside a tile.
TEST(Dropout, OnePassOpsMatchTheirStepsBitForBit) {
  const size_t n = 100003;
  std::mt19937_64 rng(51);
  const auto x = testing::to_float(testing::random_vector(n, rng, -6.0, 6.0));
  const auto g = testing::to_float(testing::random_vector(n, rng));
  const uint64_t seed = 17, offset = 300;
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    for (float p : {0.0f, 0.1f, 0.7f, 1.0f}) {
      std::vector<float> expected(n), got(n);
      cpu_swish_forward(expected.data(), x.data(), n);
      cpu_dropout_forward(expected.data(), expected.data(), p, seed, offset, n);
      cpu_swish_dropout_forward(got.data(), x.data(), p, seed, offset, n);
      EXPECT_EQ(got, expected) << "swish forward, p " << p << ", " << threads << " threads";

      cpu_dropout_forward(expected.data(), g.data(), p, seed, offset, n);
      cpu_swish_backward(expected.data(), expected.data(), x.data(), n);
      cpu_swish_dropout_backward(got.data(), g.data(), x.data(), p, seed, offset, n);
      EXPECT_EQ(got, expected) << "swish backward, p " << p << ", " << threads << " threads";

      cpu_dropout_forward(expected.data(), g.data(), p, seed, offset, n);
      for (float& v : expected) v *= 0.5f;
      cpu_dropout_backward(got.data(), g.data(), 0.5f, p, seed, offset, n);
      EXPECT_EQ(got, expected) << "scaled branch, p " << p << ", " << threads << " threads";
    }
  }
  omp_set_num_threads(1);
}

// x = base + scale Dropout(branch) as residual_layernorm_forward writes it.
std::vector<double> residual_sum(CpuBackend<double>& backend, const std::vector<double>& base,
                                 const std::vector<double>& branch, float scale, float p,
                                 uint64_t seed, uint64_t offset, int N, int C) {
  std::vector<double> x(base.size()), out(base.size()), mean(N), rstd(N);
  backend.residual_layernorm_forward(x.data(), out.data(), mean.data(), rstd.data(), base.data(),
                                     branch.data(), scale, p, seed, offset, nullptr, nullptr, N, C,
                                     1e-5f);
  return x;
}

TEST(Dropout, ResidualSumFollowsTheMask) {
  const int N = 50, C = 100;
  const size_t n = size_t(N) * C;
  std::mt19937_64 rng(51);
  const auto base = testing::random_vector(n, rng), branch = testing::random_vector(n, rng);
  CpuBackend<double> backend(2);
  const auto x = residual_sum(backend, base, branch, 0.5f, 0.3f, 9, 11, N, C);
  for (size_t i = 0; i < n; ++i) {
    const double dropped = dropout_keep(9, 11 + i, 0.3f) ? branch[i] / (1.0 - double(0.3f)) : 0.0;
    EXPECT_NEAR(x[i], base[i] + 0.5 * dropped, 1e-15) << i;
  }
  // p = 0: the plain sum.
  const auto plain = residual_sum(backend, base, branch, 0.5f, 0.0f, 9, 11, N, C);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(plain[i], base[i] + 0.5 * branch[i]) << i;
}

TEST(Dropout, ResidualBranchGradientMatchesFiniteDifferences) {
  const int N = 4, C = 16;
  const size_t n = size_t(N) * C;
  std::mt19937_64 rng(52);
  const auto base = testing::random_vector(n, rng), g = testing::random_vector(n, rng);
  auto branch = testing::random_vector(n, rng);
  CpuBackend<double> backend(1);
  for (float p : {0.0f, 0.25f}) {
    auto loss = [&] {
      return testing::dot(g, residual_sum(backend, base, branch, 0.5f, p, 4, 3, N, C));
    };
    std::vector<double> dbranch(n);
    backend.residual_dropout_backward(dbranch.data(), g.data(), 0.5f, p, 4, 3, n);
    EXPECT_LT(testing::relative_error(dbranch, testing::numeric_gradient(branch, loss)),
              testing::kGradTolerance)
        << "p=" << p;
  }
}

}  // namespace
}  // namespace mpiasr
