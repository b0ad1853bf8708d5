// The output entropy of test-time adaptation (model/output_entropy.h): its
// value against the closed forms of a uniform and a one-hot distribution,
// which frames it averages, and its gradient with respect to the logits
// against central finite differences (fp64).
#include "model/output_entropy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/model/gradient_check.h"

namespace mpiasr {
namespace {

constexpr int kVocab = 5;

// Log-softmax of logits [frames, vocab].
std::vector<double> log_softmax(const std::vector<double>& logits, int vocab) {
  std::vector<double> out(logits.size());
  for (size_t row = 0; row < logits.size(); row += size_t(vocab)) {
    double top = logits[row];
    for (int k = 1; k < vocab; ++k) top = std::max(top, logits[row + size_t(k)]);
    double sum = 0;
    for (int k = 0; k < vocab; ++k) sum += std::exp(logits[row + size_t(k)] - top);
    for (int k = 0; k < vocab; ++k)
      out[row + size_t(k)] = logits[row + size_t(k)] - top - std::log(sum);
  }
  return out;
}

TEST(OutputEntropy, UniformFramesGiveLogVocabAndOneHotFramesZero) {
  // Frame 0 uniform (its argmax ties at the blank: not counted), frame 1
  // nearly one-hot on token 2, frame 2 uniform over tokens 1 and 3.
  std::vector<double> logits(3 * kVocab, 0.0);
  logits[kVocab + 2] = 60.0;
  for (int k = 0; k < kVocab; ++k) logits[2 * kVocab + k] = (k == 1 || k == 3) ? 0.0 : -1e4;
  const std::vector<double> logprobs = log_softmax(logits, kVocab);
  const OutputEntropy entropy = output_entropy(logprobs.data(), 3, kVocab, 1.0, nullptr);
  EXPECT_EQ(entropy.frames_used, 2);
  EXPECT_NEAR(entropy.value, (0.0 + std::log(2.0)) / 2, 1e-12);

  // Every frame uniform: none has a non-blank argmax, so all count.
  const std::vector<double> uniform(2 * kVocab, -std::log(double(kVocab)));
  const OutputEntropy all = output_entropy(uniform.data(), 2, kVocab, 3.0, nullptr);
  EXPECT_EQ(all.frames_used, 2);
  EXPECT_NEAR(all.value, std::log(double(kVocab)), 1e-12);
}

TEST(OutputEntropy, TemperatureFlattensTheDistribution) {
  // Two outputs at log-probs log(0.9), log(0.1) and the rest far below:
  // at temperature 2, q is proportional to sqrt(p).
  std::vector<double> logprobs(kVocab, -1e4);
  logprobs[1] = std::log(0.9);
  logprobs[0] = std::log(0.1);
  const double a = std::sqrt(0.9), b = std::sqrt(0.1);
  const double q1 = a / (a + b), q0 = b / (a + b);
  const OutputEntropy entropy = output_entropy(logprobs.data(), 1, kVocab, 2.0, nullptr);
  EXPECT_NEAR(entropy.value, -(q1 * std::log(q1) + q0 * std::log(q0)), 1e-12);
}

TEST(OutputEntropy, GradientMatchesFiniteDifferencesOfTheLogits) {
  constexpr int kFrames = 6;
  std::vector<double> logits = testing::random_values(size_t(kFrames) * kVocab, 7, 1.5);
  // Two blank frames, left out; the others' blank well below their best.
  for (int t = 0; t < kFrames; ++t) logits[size_t(t) * kVocab] += t < 2 ? 6.0 : -6.0;
  for (double temperature : {1.0, 2.5}) {
    std::vector<double> grad(logits.size());
    const std::vector<double> logprobs = log_softmax(logits, kVocab);
    const OutputEntropy at =
        output_entropy(logprobs.data(), kFrames, kVocab, temperature, grad.data());
    EXPECT_EQ(at.frames_used, kFrames - 2);
    for (int k = 0; k < 2 * kVocab; ++k)
      EXPECT_EQ(grad[size_t(k)], 0.0) << "blank frame value " << k;
    auto value = [&] {
      const std::vector<double> lp = log_softmax(logits, kVocab);
      return output_entropy(lp.data(), kFrames, kVocab, temperature, nullptr).value;
    };
    SCOPED_TRACE("temperature " + std::to_string(temperature));
    testing::check_gradient("logits", grad.data(), logits.data(), logits.size(), value, 12, 3);
  }
}

TEST(OutputEntropy, FloatLogProbsGiveTheDoubleResult) {
  const std::vector<double> logprobs = log_softmax(testing::random_values(4 * kVocab, 11), kVocab);
  const std::vector<float> narrow(logprobs.begin(), logprobs.end());
  const double wide = output_entropy(logprobs.data(), 4, kVocab, 1.0, nullptr).value;
  EXPECT_NEAR(output_entropy(narrow.data(), 4, kVocab, 1.0, nullptr).value, wide, 1e-6 * wide);
}

}  // namespace
}  // namespace mpiasr
