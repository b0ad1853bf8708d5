// Checkpoint averaging: the averaged model is the element-wise mean computed
// by hand (values whose float running sum would lose the answer, so the sum
// must be in double), in any input order; the rest of the checkpoint is the
// newest input's, with the steps averaged recorded; checkpoints of different
// tensors, shapes, architectures or tokenizers, a step given twice and a
// single checkpoint are errors naming what is at fault.
#include "src/checkpoint_average.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>

#include "io/safetensors.h"
#include "src/base/error.h"
#include "src/training_checkpoint.h"

namespace mpiasr {
namespace {

using ::testing::HasSubstr;

class AverageTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::string(MPIASR_BINARY_DIR) + "/app_test_runs/average-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(root_);
  }

  // A checkpoint of `step` holding `weights` ("w" [2, 2] and "b" [3] unless
  // `tensors` is given), the architecture `conformer` and the tokens `tokens`.
  CheckpointLocation write(int64_t step, NamedTensors tensors, const std::string& conformer = "{}",
                           const std::string& tokens = "a\nb\n") {
    CheckpointFiles files;
    files.files[kModelFile] = tensors_to_safetensors(tensors, {{"conformer", conformer}});
    files.files[kOptimizerFile] = "moments of step " + std::to_string(step);
    files.files[kConfigFile] = "config of step " + std::to_string(step);
    files.files["tokens.txt"] = tokens;
    TrainingState state;
    state.step = step;
    state.tokenizer_file = "tokens.txt";
    files.state = state.to_json();
    write_checkpoint(root_, step, files, 10, std::nullopt);
    return {root_, step, checkpoint_dir(root_, step)};
  }

  static NamedTensors weights(float w0, float w1, float w2, float w3, float b0, float b1,
                              float b2) {
    NamedTensors tensors;
    tensors["w"] = {{2, 2}, {w0, w1, w2, w3}};
    tensors["b"] = {{3}, {b0, b1, b2}};
    return tensors;
  }

  static std::string error_of(const std::vector<CheckpointLocation>& checkpoints) {
    try {
      average_checkpoints(checkpoints);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kCheckpoint);
      return e.what();
    }
    ADD_FAILURE() << "no error";
    return "";
  }

  std::string root_;
};

TEST_F(AverageTest, ModelIsTheElementWiseMeanAndTheRestIsTheNewest) {
  const CheckpointLocation a = write(100, weights(1e8f, 2, -4, 0.5f, 3, 0, -1));
  const CheckpointLocation b = write(200, weights(1, 4, 8, 0.25f, 6, 0, -2));
  const CheckpointLocation c = write(300, weights(-1e8f, 6, 2, 0.75f, 9, 0, -3));
  // By hand: (1e8 + 1 - 1e8) / 3 = 1/3; a float running sum gives 0.
  const std::vector<float> expected_w = {1.0f / 3, 4, 2, 0.5f};
  const std::vector<float> expected_b = {6, 0, -2};
  for (const std::vector<CheckpointLocation>& order :
       {std::vector<CheckpointLocation>{a, b, c}, std::vector<CheckpointLocation>{c, a, b}}) {
    const CheckpointFiles averaged = average_checkpoints(order);
    const NamedTensors mean = tensors_from_safetensors(averaged.files.at(kModelFile), "averaged");
    ASSERT_EQ(mean.size(), 2u);
    EXPECT_EQ(mean.at("w").shape, (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(mean.at("w").data, expected_w);
    EXPECT_EQ(mean.at("b").data, expected_b);
    EXPECT_EQ(parse_safetensors(averaged.files.at(kModelFile), "averaged").metadata.at("conformer"),
              "{}");
    EXPECT_EQ(averaged.files.at(kOptimizerFile), "moments of step 300");
    EXPECT_EQ(averaged.files.at(kConfigFile), "config of step 300");
    EXPECT_EQ(averaged.state.at("step"), 300);
    EXPECT_EQ(averaged.state.at("averaged_steps"), nlohmann::json::array({100, 200, 300}));
  }
  // Two checkpoints: the plain mean.
  const NamedTensors pair =
      tensors_from_safetensors(average_checkpoints({b, c}).files.at(kModelFile), "pair");
  EXPECT_EQ(pair.at("b").data, (std::vector<float>{7.5f, 0, -2.5f}));
}

TEST_F(AverageTest, CheckpointsThatDifferAreErrorsNamingTheDifference) {
  const CheckpointLocation a = write(100, weights(1, 2, 3, 4, 5, 6, 7));
  NamedTensors reshaped = weights(1, 2, 3, 4, 5, 6, 7);
  reshaped["w"].shape = {4, 1};
  EXPECT_THAT(error_of({a, write(200, reshaped)}), HasSubstr("the shape of 'w'"));
  NamedTensors renamed = weights(1, 2, 3, 4, 5, 6, 7);
  renamed["bias"] = renamed.at("b");
  renamed.erase("b");
  EXPECT_THAT(error_of({a, write(300, renamed)}), HasSubstr("'bias' is missing"));
  NamedTensors extra = weights(1, 2, 3, 4, 5, 6, 7);
  extra["c"] = {{1}, {0}};
  EXPECT_THAT(error_of({a, write(400, extra)}), HasSubstr("the number of tensors"));
  const std::string architecture =
      error_of({a, write(500, weights(1, 2, 3, 4, 5, 6, 7), R"({"layers":2})")});
  EXPECT_THAT(architecture, HasSubstr("the architecture"));
  EXPECT_THAT(architecture, HasSubstr(checkpoint_dir(root_, 100)));
  EXPECT_THAT(architecture, HasSubstr(checkpoint_dir(root_, 500)));
  EXPECT_THAT(error_of({a, write(600, weights(1, 2, 3, 4, 5, 6, 7), "{}", "a\nc\n")}),
              HasSubstr("tokens.txt"));
  EXPECT_THAT(error_of({a}), HasSubstr("at least two checkpoints, got 1"));
  EXPECT_THAT(error_of({a, a}), HasSubstr("step 100 given twice"));
}

}  // namespace
}  // namespace mpiasr
