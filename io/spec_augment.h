// SpecAugment (Park et al. 2019) without time warping: frequency and time
// masks over normalized log-mel features, filled with 0 (the mean after CMVN).
//
//   freq_masks times: width f ~ U{0 .. min(freq_width, n_mels)},
//                     first bin f0 ~ U{0 .. n_mels - f},  x[:, f0 : f0+f] = 0
//   time_masks times: width w ~ U{0 .. floor(time_width_ratio * frames)},
//                     first frame t0 ~ U{0 .. frames - w}, x[t0 : t0+w, :] = 0
// Masks may overlap. The draws come from std::mt19937_64 seeded with the
// caller's seed (spec_augment_seed mixes global seed, epoch and utterance), so
// the masks depend only on that seed, never on thread timing.
//
// Features: float [frames, n_mels], row-major, masked in place.
#pragma once

#include <cstdint>
#include <vector>

namespace mpiasr {

struct SpecAugmentOptions {
  int freq_masks = 2;
  int freq_width = 27;  // bins
  int time_masks = 10;
  double time_width_ratio = 0.05;  // of the utterance's frames
};

struct SpecAugmentMask {
  int start = 0;  // first masked bin or frame
  int width = 0;  // 0 masks nothing
};

struct SpecAugmentMasks {
  std::vector<SpecAugmentMask> freq;  // over mel bins
  std::vector<SpecAugmentMask> time;  // over frames
};

SpecAugmentMasks draw_spec_augment_masks(int frames, int n_mels, const SpecAugmentOptions& options,
                                         uint64_t seed);
void apply_spec_augment_masks(float* feats, int frames, int n_mels, const SpecAugmentMasks& masks);

// draw_spec_augment_masks, then apply_spec_augment_masks.
void spec_augment(float* feats, int frames, int n_mels, const SpecAugmentOptions& options,
                  uint64_t seed);

// A seed for one utterance in one epoch: splitmix64 over the three values, so
// nearby inputs give unrelated seeds.
uint64_t spec_augment_seed(uint64_t global_seed, uint64_t epoch, uint64_t utterance_index);

}  // namespace mpiasr
