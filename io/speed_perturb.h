// Speed perturbation (Ko et al. 2015, "Audio augmentation for speech
// recognition"), as Kaldi's perturb_data_dir_speed.sh does it with sox's
// `speed` effect and ESPnet and icefall recipes copy: the audio is played f
// times faster, so tempo and pitch both change by f.
//
//   y = resample(x, from rate f * sr to sr)     (soxr, io/audio.h Resampler)
//
// n samples become about n / f, and a tone of F Hz becomes one of f F Hz.
// Factors are usually 0.9, 1.0 and 1.1 (the training data three times over,
// in expectation). The loader draws one per utterance and epoch:
//   k = derive_seed(seed ^ stream, epoch, utterance) mod |factors|   (src/base/rng.h)
// so the choice depends only on those three values (resume repeats it).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace mpiasr {

// The factor of `utterance` in `epoch`: one of `factors`, uniformly.
double speed_factor(std::span<const double> factors, uint64_t seed, uint64_t epoch,
                    uint64_t utterance);

// `samples` at `sample_rate` played `factor` times faster, at the same rate.
// Factor 1 returns the samples unchanged.
std::vector<float> speed_perturb(std::span<const float> samples, int sample_rate, double factor);

}  // namespace mpiasr
