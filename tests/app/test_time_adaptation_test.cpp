// Test-time adaptation (src/test_time_adaptation.h) on the tiny model in
// fp64: one step is Adam's first step in closed form, theta - lr g / (|g| +
// eps), on the LayerNorm parameters alone (g from the output entropy's
// gradient, whose backward model/conformer_test checks against finite
// differences); more steps lower the entropy; the weights are the
// checkpoint's again afterwards; one utterance at a time.
#include "src/test_time_adaptation.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "tests/model/random_batch.h"

namespace mpiasr {
namespace {

constexpr int kVocab = 7;

class TestTimeAdaptationTest : public ::testing::Test {
 protected:
  static ConformerConfig tiny() {
    ConformerConfig config = conformer_preset("tiny");
    config.vocab_size = kVocab;
    return config;
  }
  std::vector<double> masters() {
    ParameterStore<double, double>& params = model_.params();
    return std::vector<double>(params.master(), params.master() + params.size());
  }
  double entropy_of(const std::vector<double>& logprobs, const std::vector<int32_t>& lengths) {
    return output_entropy(logprobs.data(), lengths[0], kVocab, 1.0, nullptr).value;
  }

  CpuBackend<double> backend_{1};
  Conformer<double, double> model_{backend_, tiny(), 2, 40, 3};
  HostBatch utterance_ = testing::random_batch({40}, {{1, 2, 3, 4}}, 40, 9, 0);
};

TEST_F(TestTimeAdaptationTest, OneStepIsAdamsFirstStepOnTheNormParameters) {
  constexpr double kLearningRate = 1e-3;
  const std::vector<double> checkpoint = masters();

  // The expected step, by hand: every LayerNorm parameter moves by the
  // learning rate against the sign of its gradient, every other stays.
  std::vector<double> logprobs;
  std::vector<int32_t> lengths;
  model_.infer(utterance_, logprobs, lengths);
  std::vector<double> dlogits(logprobs.size(), 0.0);
  output_entropy(logprobs.data(), lengths[0], kVocab, 1.0, dlogits.data());
  ParameterStore<double, double>& params = model_.params();
  params.zero_grad();
  model_.backward_from_logits(dlogits.data());
  std::vector<double> stepped = checkpoint;
  size_t moved = 0;
  for (const ParameterInfo& info : params.infos()) {
    if (info.kind != ParameterKind::kNormWeight && info.kind != ParameterKind::kNormBias) continue;
    for (size_t i = info.offset; i < info.offset + info.count; ++i) {
      const double g = params.grad()[i];
      stepped[i] -= kLearningRate * g / (std::abs(g) + 1e-8);
      moved += g != 0;
    }
  }
  EXPECT_GT(moved, params.infos().size());  // the gradient reaches the norms
  std::copy(stepped.begin(), stepped.end(), params.master());
  std::vector<double> expected;
  model_.infer(utterance_, expected, lengths);
  std::copy(checkpoint.begin(), checkpoint.end(), params.master());

  TestTimeAdaptation<double, double> adaptation(model_, {1, kLearningRate, 1.0});
  size_t norm_parameters = 0;
  for (const ParameterInfo& info : params.infos()) {
    norm_parameters +=
        info.kind == ParameterKind::kNormWeight || info.kind == ParameterKind::kNormBias
            ? info.count
            : 0;
  }
  EXPECT_EQ(adaptation.adapted_parameters(), norm_parameters);
  std::vector<double> adapted;
  adaptation.infer(utterance_, adapted, lengths);
  ASSERT_EQ(adapted.size(), expected.size());
  for (size_t i = 0; i < adapted.size(); ++i) ASSERT_NEAR(adapted[i], expected[i], 1e-9) << i;
  EXPECT_EQ(masters(), checkpoint);  // bit for bit
  for (size_t i = 0; i < params.size(); ++i) ASSERT_EQ(params.grad()[i], 0.0);
}

TEST_F(TestTimeAdaptationTest, StepsLowerTheEntropyAndLeaveTheCheckpointAsItWas) {
  const std::vector<double> checkpoint = masters();
  std::vector<double> before, after;
  std::vector<int32_t> lengths;
  model_.infer(utterance_, before, lengths);
  TestTimeAdaptation<double, double> adaptation(model_, {10, 1e-2, 1.0});
  adaptation.infer(utterance_, after, lengths);
  EXPECT_LT(entropy_of(after, lengths), 0.9 * entropy_of(before, lengths));
  EXPECT_EQ(masters(), checkpoint);
  // Twice the same: nothing of the first adaptation is kept.
  std::vector<double> again;
  adaptation.infer(utterance_, again, lengths);
  EXPECT_EQ(again, after);
}

TEST_F(TestTimeAdaptationTest, TakesOneUtteranceAtATime) {
  const HostBatch two = testing::random_batch({40, 30}, {{1, 2}, {3}}, 40, 1, 0);
  TestTimeAdaptation<double, double> adaptation(model_, {1, 1e-3, 1.0});
  std::vector<double> logprobs;
  std::vector<int32_t> lengths;
  EXPECT_THROW(adaptation.infer(two, logprobs, lengths), Error);
  const AdaptationOptions no_steps{0, 1e-3, 1.0};
  using Adaptation = TestTimeAdaptation<double, double>;
  EXPECT_THROW(Adaptation(model_, no_steps), Error);
}

}  // namespace
}  // namespace mpiasr
