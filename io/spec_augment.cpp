// SpecAugment frequency and time masks (see spec_augment.h).
#include "io/spec_augment.h"

#include <algorithm>
#include <cmath>
#include <random>

#include "src/base/error.h"
#include "src/base/rng.h"

namespace mpiasr {

namespace {

// Uniform integer in [0, bound], by the multiply-shift of a 64-bit draw (the
// same on every standard library, unlike std::uniform_int_distribution).
int uniform_up_to(std::mt19937_64& rng, int bound) {
  const unsigned __int128 product =
      static_cast<unsigned __int128>(rng()) * (static_cast<uint64_t>(bound) + 1);
  return static_cast<int>(product >> 64);
}

}  // namespace

SpecAugmentMasks draw_spec_augment_masks(int frames, int n_mels, const SpecAugmentOptions& options,
                                         uint64_t seed) {
  if (options.freq_masks < 0 || options.freq_width < 0 || options.time_masks < 0 ||
      !(options.time_width_ratio >= 0 && options.time_width_ratio <= 1))
    MPIASR_FAIL(ExitCode::kUsage, "spec_augment: freq_masks "
                                      << options.freq_masks << ", freq_width " << options.freq_width
                                      << ", time_masks " << options.time_masks
                                      << ", time_width_ratio " << options.time_width_ratio
                                      << " (need counts >= 0 and a ratio in [0, 1])");
  MPIASR_CHECK(frames >= 0 && n_mels > 0,
               "spec_augment: frames " << frames << ", n_mels " << n_mels);
  std::mt19937_64 rng(seed);
  SpecAugmentMasks masks;
  const int max_freq_width = std::min(options.freq_width, n_mels);
  for (int i = 0; i < options.freq_masks; ++i) {
    SpecAugmentMask mask;
    mask.width = uniform_up_to(rng, max_freq_width);
    mask.start = uniform_up_to(rng, n_mels - mask.width);
    masks.freq.push_back(mask);
  }
  const int max_time_width = static_cast<int>(std::floor(options.time_width_ratio * frames));
  for (int i = 0; i < options.time_masks; ++i) {
    SpecAugmentMask mask;
    mask.width = uniform_up_to(rng, max_time_width);
    mask.start = uniform_up_to(rng, frames - mask.width);
    masks.time.push_back(mask);
  }
  return masks;
}

void apply_spec_augment_masks(float* feats, int frames, int n_mels, const SpecAugmentMasks& masks) {
  for (const SpecAugmentMask& mask : masks.freq) {
    MPIASR_CHECK(mask.start >= 0 && mask.width >= 0 && mask.start + mask.width <= n_mels,
                 "spec_augment: frequency mask " << mask.start << "+" << mask.width << " of "
                                                 << n_mels << " bins");
    for (int t = 0; t < frames; ++t)
      std::fill_n(feats + static_cast<size_t>(t) * n_mels + mask.start, mask.width, 0.0f);
  }
  for (const SpecAugmentMask& mask : masks.time) {
    MPIASR_CHECK(mask.start >= 0 && mask.width >= 0 && mask.start + mask.width <= frames,
                 "spec_augment: time mask " << mask.start << "+" << mask.width << " of " << frames
                                            << " frames");
    std::fill_n(feats + static_cast<size_t>(mask.start) * n_mels,
                static_cast<size_t>(mask.width) * n_mels, 0.0f);
  }
}

void spec_augment(float* feats, int frames, int n_mels, const SpecAugmentOptions& options,
                  uint64_t seed) {
  apply_spec_augment_masks(feats, frames, n_mels,
                           draw_spec_augment_masks(frames, n_mels, options, seed));
}

uint64_t spec_augment_seed(uint64_t global_seed, uint64_t epoch, uint64_t utterance_index) {
  return derive_seed({global_seed, epoch, utterance_index});
}

}  // namespace mpiasr
