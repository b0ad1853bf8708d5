// SpecAugment: mask counts and widths within bounds (and reaching them),
// exactly the masked cells zeroed, seeds decide everything, zero masks leave
// the features alone.
#include "io/spec_augment.h"

#include <algorithm>
#include <set>
#include <vector>

#include <gtest/gtest.h>

#include "src/base/error.h"

namespace mpiasr {
namespace {

std::vector<float> ones(int frames, int n_mels) {
  return std::vector<float>(static_cast<size_t>(frames) * n_mels, 1.0f);
}

TEST(SpecAugment, MasksStayWithinTheirBoundsAndReachThem) {
  const SpecAugmentOptions options;  // 2 x <= 27 bins, 10 x <= 5% of frames
  const int frames = 1000, n_mels = 80;
  std::set<int> freq_widths, time_widths;
  for (uint64_t seed = 0; seed < 2000; ++seed) {
    const SpecAugmentMasks masks = draw_spec_augment_masks(frames, n_mels, options, seed);
    ASSERT_EQ(masks.freq.size(), 2u);
    ASSERT_EQ(masks.time.size(), 10u);
    for (const SpecAugmentMask& mask : masks.freq) {
      ASSERT_GE(mask.width, 0);
      ASSERT_LE(mask.width, 27);
      ASSERT_GE(mask.start, 0);
      ASSERT_LE(mask.start + mask.width, n_mels);
      freq_widths.insert(mask.width);
    }
    for (const SpecAugmentMask& mask : masks.time) {
      ASSERT_GE(mask.width, 0);
      ASSERT_LE(mask.width, 50);
      ASSERT_GE(mask.start, 0);
      ASSERT_LE(mask.start + mask.width, frames);
      time_widths.insert(mask.width);
    }
  }
  // Every width from 0 to the maximum occurs.
  EXPECT_EQ(freq_widths.size(), 28u);
  EXPECT_EQ(time_widths.size(), 51u);

  // Wider than the features: clamped to them.
  SpecAugmentOptions wide;
  wide.freq_width = 100;
  for (uint64_t seed = 0; seed < 100; ++seed)
    for (const SpecAugmentMask& mask : draw_spec_augment_masks(10, 4, wide, seed).freq)
      ASSERT_LE(mask.start + mask.width, 4);
}

TEST(SpecAugment, ZeroesExactlyTheMaskedCells) {
  const int frames = 300, n_mels = 80;
  const uint64_t seed = spec_augment_seed(1234, 3, 17);
  const SpecAugmentMasks masks = draw_spec_augment_masks(frames, n_mels, {}, seed);
  std::vector<float> feats = ones(frames, n_mels);
  spec_augment(feats.data(), frames, n_mels, {}, seed);
  int zeroed = 0;
  for (int t = 0; t < frames; ++t)
    for (int j = 0; j < n_mels; ++j) {
      bool masked = false;
      for (const SpecAugmentMask& m : masks.freq) masked |= j >= m.start && j < m.start + m.width;
      for (const SpecAugmentMask& m : masks.time) masked |= t >= m.start && t < m.start + m.width;
      ASSERT_EQ(feats[t * n_mels + j], masked ? 0.0f : 1.0f) << t << ", " << j;
      zeroed += masked;
    }
  EXPECT_GT(zeroed, 0);
}

TEST(SpecAugment, SeedDecidesTheMasks) {
  const int frames = 500, n_mels = 80;
  std::vector<float> a = ones(frames, n_mels), b = a, c = a;
  spec_augment(a.data(), frames, n_mels, {}, spec_augment_seed(1, 0, 5));
  spec_augment(b.data(), frames, n_mels, {}, spec_augment_seed(1, 0, 5));
  spec_augment(c.data(), frames, n_mels, {}, spec_augment_seed(1, 0, 6));
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);

  // Seeds of neighbouring (seed, epoch, utterance) triples all differ.
  std::set<uint64_t> seeds;
  for (uint64_t s = 0; s < 4; ++s)
    for (uint64_t e = 0; e < 4; ++e)
      for (uint64_t u = 0; u < 4; ++u) seeds.insert(spec_augment_seed(s, e, u));
  EXPECT_EQ(seeds.size(), 64u);
}

TEST(SpecAugment, ZeroMasksAreTheIdentity) {
  SpecAugmentOptions none;
  none.freq_masks = 0;
  none.time_masks = 0;
  std::vector<float> feats(200 * 80);
  for (size_t i = 0; i < feats.size(); ++i) feats[i] = static_cast<float>(i % 97) - 40.0f;
  const std::vector<float> original = feats;
  spec_augment(feats.data(), 200, 80, none, 99);
  EXPECT_EQ(feats, original);

  // So are masks drawn with zero maximum widths.
  SpecAugmentOptions narrow;
  narrow.freq_width = 0;
  narrow.time_width_ratio = 0;
  spec_augment(feats.data(), 200, 80, narrow, 99);
  EXPECT_EQ(feats, original);

  // Utterances shorter than 1 / time_width_ratio frames get no time masks.
  std::vector<float> short_feats = ones(19, 80);
  SpecAugmentOptions time_only;
  time_only.freq_masks = 0;
  spec_augment(short_feats.data(), 19, 80, time_only, 5);
  EXPECT_EQ(short_feats, ones(19, 80));
}

TEST(SpecAugment, RejectsBadOptions) {
  SpecAugmentOptions options;
  options.time_width_ratio = 1.5;
  EXPECT_THROW(draw_spec_augment_masks(100, 80, options, 0), Error);
  options = {};
  options.freq_masks = -1;
  EXPECT_THROW(draw_spec_augment_masks(100, 80, options, 0), Error);
}

}  // namespace
}  // namespace mpiasr
