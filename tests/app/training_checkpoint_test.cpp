// Checkpoint state of the trainer: TrainingState survives state.json field
// for field (an infinite best CER as null), a missing or mistyped field is an
// error naming it (but a checkpoint older than train_seconds has spent none), tensors survive
// safetensors bit for bit, and locate_checkpoint finds what a user names (step folder, root with
// pointers, output folder) and skips a corrupt pointed-to checkpoint.
#include "src/training_checkpoint.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "src/base/error.h"
#include "src/base/file.h"

namespace mpiasr {
namespace {

TrainingState example_state() {
  TrainingState s;
  s.step = 1234;
  s.optimizer_step = 1230;
  s.epoch = 3;
  s.batch_in_epoch = 17;
  s.batches_in_epoch = 40;
  s.seed = 0xFFFFFFFFFFFFFFFFull;
  s.scaler = {{"enabled", true}, {"scale", 32768.0}, {"growth_tracker", 12}};
  s.total_steps = 5000;
  s.lr = 1.2345678901234567e-3;
  s.train_seconds = 3599.25;
  s.best_cer = 0.0625;
  s.best_step = 1000;
  s.world_size = 4;
  s.accumulation = 2;
  s.threads = 3;
  s.config_hash = "0123456789abcdef";
  s.train_manifest_hash = "fedcba9876543210";
  s.valid_manifest_hash = "";
  s.tokenizer_file = "tokenizer.model";
  s.cmvn_file = "cmvn.json";
  return s;
}

void expect_equal(const TrainingState& a, const TrainingState& b) {
  EXPECT_EQ(a.to_json().dump(), b.to_json().dump());
  EXPECT_EQ(a.step, b.step);
  EXPECT_EQ(a.optimizer_step, b.optimizer_step);
  EXPECT_EQ(a.epoch, b.epoch);
  EXPECT_EQ(a.batch_in_epoch, b.batch_in_epoch);
  EXPECT_EQ(a.seed, b.seed);
  EXPECT_EQ(a.lr, b.lr);
  EXPECT_EQ(a.train_seconds, b.train_seconds);
  EXPECT_EQ(a.best_cer, b.best_cer);
  EXPECT_EQ(a.scaler, b.scaler);
  EXPECT_EQ(a.cmvn_file, b.cmvn_file);
}

TEST(TrainingStateTest, RoundTripsThroughStateJson) {
  const TrainingState state = example_state();
  const std::string text = state.to_json().dump(2);
  expect_equal(TrainingState::from_json(nlohmann::json::parse(text), "state.json"), state);
}

TEST(TrainingStateTest, NoValidationYetIsNullAndInfinite) {
  TrainingState state = example_state();
  state.best_cer = std::numeric_limits<double>::infinity();
  state.best_step = 0;
  const nlohmann::json json = nlohmann::json::parse(state.to_json().dump());
  EXPECT_TRUE(json["best_cer"].is_null());
  EXPECT_TRUE(std::isinf(TrainingState::from_json(json, "state.json").best_cer));
}

TEST(TrainingStateTest, MissingOrBadFieldIsNamed) {
  nlohmann::json json = example_state().to_json();
  json.erase("batch_in_epoch");
  try {
    TrainingState::from_json(json, "ckpt/state.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kCheckpoint);
    EXPECT_NE(std::string(e.what()).find("ckpt/state.json lacks \"batch_in_epoch\""),
              std::string::npos)
        << e.what();
  }
  json = example_state().to_json();
  json["epoch"] = "three";
  try {
    TrainingState::from_json(json, "ckpt/state.json");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("bad \"epoch\": \"three\""), std::string::npos)
        << e.what();
  }
}

TEST(TrainingStateTest, CheckpointWithoutTrainSecondsHasSpentNoTime) {
  nlohmann::json json = example_state().to_json();
  json.erase("train_seconds");
  EXPECT_EQ(TrainingState::from_json(json, "state.json").train_seconds, 0.0);
  json["train_seconds"] = "an hour";
  EXPECT_THROW(TrainingState::from_json(json, "state.json"), Error);
}

TEST(TrainingCheckpointTest, TensorsRoundTripBitForBit) {
  NamedTensors tensors;
  tensors["encoder.layers.0.ff1.linear1.weight"] = {{2, 3}, {1.5f, -0.0f, 1e-38f, 3.4e38f, -2, 7}};
  tensors["ctc_head.bias"] = {{2}, {0.25f, -8}};
  const NamedTensors back = tensors_from_safetensors(tensors_to_safetensors(tensors), "t");
  ASSERT_EQ(back.size(), 2u);
  for (const auto& [name, tensor] : tensors) {
    EXPECT_EQ(back.at(name).shape, tensor.shape);
    EXPECT_EQ(0, std::memcmp(back.at(name).data.data(), tensor.data.data(),
                             tensor.data.size() * sizeof(float)));
  }
}

class LocateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One folder per test: ctest runs the cases of this fixture in parallel.
    output_ = std::string(MPIASR_BINARY_DIR) + "/app_test_runs/locate-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name();
    std::filesystem::remove_all(output_);
    root_ = output_ + "/checkpoints";
    for (int64_t step : {100, 200, 300}) {
      CheckpointFiles files;
      files.files["model.safetensors"] = "weights of step " + std::to_string(step);
      files.state = {{"step", step}};
      write_checkpoint(root_, step, files, 5,
                       step == 200 ? std::optional<int64_t>(200) : std::nullopt);
    }
  }
  std::vector<std::string> messages_;
  CheckpointLog log_ = [this](const std::string& m) { messages_.push_back(m); };
  std::string output_, root_;
};

TEST_F(LocateTest, FindsBestThenLatestFromARootOrAnOutputFolder) {
  EXPECT_EQ(locate_checkpoint(root_, log_).step, 200);
  EXPECT_EQ(locate_checkpoint(output_, log_).step, 200);
  std::filesystem::remove(root_ + "/best");
  EXPECT_EQ(locate_checkpoint(output_, log_).step, 300);
  const CheckpointLocation step = locate_checkpoint(checkpoint_dir(root_, 100), log_);
  EXPECT_EQ(step.step, 100);
  EXPECT_TRUE(std::filesystem::equivalent(step.root, root_));
  EXPECT_TRUE(messages_.empty());
}

TEST_F(LocateTest, SkipsACorruptPointedCheckpoint) {
  write_file_synced(checkpoint_dir(root_, 200) + "/model.safetensors", "weights of step 2X0");
  const CheckpointLocation found = locate_checkpoint(root_, log_);
  EXPECT_EQ(found.step, 300);  // best is corrupt: latest
  ASSERT_EQ(messages_.size(), 1u);
  EXPECT_NE(messages_[0].find("step-00000200 (best) is not intact"), std::string::npos)
      << messages_[0];
}

// The message of the checkpoint Error that locate_checkpoint(path) throws.
std::string locate_error(const std::string& path, const CheckpointLog& log) {
  try {
    locate_checkpoint(path, log);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kCheckpoint);
    return e.what();
  }
  ADD_FAILURE() << "no error for " << path;
  return "";
}

TEST_F(LocateTest, NothingThereIsACheckpointError) {
  EXPECT_THAT(locate_error(output_ + "/nothing", log_),
              testing::StartsWith("checkpoint '" + output_ + "/nothing': file not found"));
  std::filesystem::create_directories(output_ + "/empty");
  EXPECT_THAT(locate_error(output_ + "/empty", log_),
              testing::StartsWith("no intact checkpoint in " + output_ + "/empty"));
}

// A step folder whose state.json is missing or garbled says so (not "no
// intact checkpoint... give a step folder" or "has no step"), where the JSON
// breaks, and which checkpoint next to it is intact.
TEST_F(LocateTest, AStepFolderSaysWhatIsWrongWithItsStateJson) {
  const std::string step300 = checkpoint_dir(root_, 300), step200 = checkpoint_dir(root_, 200);
  std::filesystem::remove(step300 + "/state.json");
  EXPECT_THAT(locate_error(step300, log_),
              testing::StartsWith("checkpoint " + step300 +
                                  " is not intact: state.json is missing; the newest intact "
                                  "checkpoint next to it is " +
                                  step200));
  write_file_synced(step300 + "/state.json", "{\"step\": 300, \"files\": ");
  const std::string garbled = locate_error(step300, log_);
  EXPECT_THAT(garbled, testing::StartsWith("checkpoint " + step300 +
                                           " is not intact: state.json is not valid JSON ("));
  EXPECT_THAT(garbled, testing::HasSubstr("parse error at line 1, column 24"));
  write_file_synced(step300 + "/state.json", "{\"files\": {}}");
  EXPECT_THAT(locate_error(step300, log_),
              testing::StartsWith("checkpoint " + step300 +
                                  " is not intact: state.json has no integer \"step\""));
}

// A garbled pointer is reported, and the newest intact checkpoint is used.
TEST_F(LocateTest, AGarbledPointerFallsBackToTheNewestIntact) {
  write_file_synced(root_ + "/best", "step-0000\x01\n");
  write_file_synced(root_ + "/latest", "garbage");
  const CheckpointLocation found = locate_checkpoint(output_, log_);
  EXPECT_EQ(found.step, 300);
  ASSERT_EQ(messages_.size(), 2u);
  EXPECT_THAT(messages_[0], testing::StartsWith(root_ + "/best: expected a folder name like "
                                                        "step-00001000"));
  EXPECT_THAT(messages_[1],
              testing::HasSubstr("/latest: expected a folder name like step-00001000, "
                                 "found 'garbage'"));
  EXPECT_THAT(messages_[1],
              testing::HasSubstr("; looking for the newest intact checkpoint instead"));
}

}  // namespace
}  // namespace mpiasr
