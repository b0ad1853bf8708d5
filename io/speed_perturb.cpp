// Speed perturbation by resampling; see speed_perturb.h.
#include "io/speed_perturb.h"

#include "io/audio.h"
#include "src/base/error.h"
#include "src/base/rng.h"

namespace mpiasr {

double speed_factor(std::span<const double> factors, uint64_t seed, uint64_t epoch,
                    uint64_t utterance) {
  MPIASR_CHECK(!factors.empty(), "speed perturbation without factors");
  constexpr uint64_t kSpeedStream = 0x7370656564ULL;  // "speed"
  const uint64_t draw = derive_seed({seed ^ kSpeedStream, epoch, utterance});
  return factors[draw % factors.size()];
}

std::vector<float> speed_perturb(std::span<const float> samples, int sample_rate, double factor) {
  MPIASR_CHECK(factor > 0 && sample_rate > 0,
               "speed perturbation by " << factor << " at " << sample_rate << " Hz");
  if (factor == 1.0) return std::vector<float>(samples.begin(), samples.end());
  return Resampler(factor * sample_rate, sample_rate).resample(samples);
}

}  // namespace mpiasr
