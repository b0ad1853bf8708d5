// Speed perturbation: a factor f must change both the length (n samples ->
// n / f) and the pitch (F Hz -> f F Hz) of the audio, measured on a tone by
// its zero crossings; and the factor drawn per utterance and epoch must be
// reproducible and spread over the factors.
#include "io/speed_perturb.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>

namespace mpiasr {
namespace {

// Frequency of a tone from its upward zero crossings between 10% and 90% of
// the signal (the edges hold the resampler's filter transients).
double tone_frequency(const std::vector<float>& x, int sample_rate) {
  const size_t begin = x.size() / 10, end = x.size() * 9 / 10;
  double first = -1, last = -1;
  int crossings = 0;
  for (size_t t = begin + 1; t < end; ++t) {
    if (x[t - 1] < 0 && x[t] >= 0) {
      // The crossing's position, interpolated between the two samples.
      const double at = double(t - 1) + double(x[t - 1]) / double(x[t - 1] - x[t]);
      if (first < 0) first = at;
      last = at;
      ++crossings;
    }
  }
  return (crossings - 1) * double(sample_rate) / (last - first);
}

TEST(SpeedPerturb, ChangesLengthAndPitchByTheFactor) {
  const int rate = 16000;
  const double frequency = 437.3;
  std::vector<float> tone(size_t(2 * rate));
  for (size_t t = 0; t < tone.size(); ++t) {
    tone[t] = 0.5f * float(std::sin(2 * M_PI * frequency * double(t) / rate));
  }
  EXPECT_NEAR(tone_frequency(tone, rate), frequency, 0.01);
  for (double factor : {0.9, 1.1, 0.95, 1.05}) {
    const std::vector<float> out = speed_perturb(tone, rate, factor);
    EXPECT_NEAR(double(out.size()), double(tone.size()) / factor, 2.0) << factor;
    EXPECT_NEAR(tone_frequency(out, rate), frequency * factor, 0.05) << factor;
  }
  EXPECT_EQ(speed_perturb(tone, rate, 1.0), tone);
}

TEST(SpeedFactor, ReproducibleSpreadAndKeyedByEveryInput) {
  const std::vector<double> factors = {0.9, 1.0, 1.1};
  std::map<double, int> counts;
  int same_next_epoch = 0, same_other_seed = 0;
  const int n = 3000;
  for (uint64_t i = 0; i < uint64_t(n); ++i) {
    const double f = speed_factor(factors, 7, 2, i);
    EXPECT_EQ(f, speed_factor(factors, 7, 2, i));
    ++counts[f];
    same_next_epoch += f == speed_factor(factors, 7, 3, i);
    same_other_seed += f == speed_factor(factors, 8, 2, i);
  }
  ASSERT_EQ(counts.size(), 3u);
  for (const auto& [factor, count] : counts) {
    EXPECT_NEAR(count, n / 3, 5 * std::sqrt(n * 2.0 / 9)) << factor;  // 5 standard deviations
  }
  // Independent draws agree a third of the time.
  EXPECT_NEAR(same_next_epoch, n / 3, 5 * std::sqrt(n * 2.0 / 9));
  EXPECT_NEAR(same_other_seed, n / 3, 5 * std::sqrt(n * 2.0 / 9));
}

}  // namespace
}  // namespace mpiasr
