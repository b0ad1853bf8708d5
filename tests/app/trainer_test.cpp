// The trainer end to end on a tiny model and corpus (a world of one rank):
//   - a run stopped at step k and resumed repeats the uninterrupted run bit
//     for bit (every step's loss, LR and gradient norm; the final weights and
//     Adam moments), mid-epoch and across an epoch boundary, with gradient
//     accumulation, dropout, dither, speed perturbation and SpecAugment all on;
//   - a corrupt newest checkpoint is reported and the previous one resumed,
//     which again ends on the uninterrupted run's weights;
//   - config overrides reach the training state (LR, step count, model size,
//     the saved config and its hash);
//   - model.safetensors, read by a reader written here from the format's
//     definition, holds every parameter under PyTorch-style names with the
//     model's shapes, and the values the trainer holds;
//   - a changed config is reported key by key with both values;
//   - output.diagnostic_steps writes, for the first steps, the learning
//     rate, the blank bias and its gradient and each part's gradient norm
//     that the checkpoints hold (the weights before the step, AdamW's first
//     moments), and the blank statistics of the model before the step
//     decoding the step's utterances;
//   - model.prior_bias starts the head's biases at the output prior of the
//     train set, and changes no other weight;
//   - training.max_minutes, once spent, ends training after the step in
//     progress with a validation and a checkpoint that keeps the time spent;
//     a rerun trains no more, the time spent is the checkpoint's, and a run
//     with a larger budget resumes and ends on the weights of a run that had
//     no budget.
#include "src/trainer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <regex>
#include <sstream>

#include "io/audio.h"
#include "io/checksum.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/conformer.h"
#include "src/base/file.h"
#include "src/dataset.h"
#include "src/feature_pipeline.h"
#include "src/model_config.h"
#include "src/output_prior.h"
#include "src/recognizer.h"
#include "src/training_checkpoint.h"
#include "tests/app/training_fixture.h"

namespace mpiasr {
namespace {

using testing::fresh_dir;
using testing::metrics_of;
using testing::tiny_config;

const auto* const kMpi = ::testing::AddGlobalTestEnvironment(new testing::MpiEnvironment);

TrainResult run(const Config& config, const TrainOptions& options = {},
                std::string* log = nullptr) {
  mpi::Context ctx = mpi::Context::world();
  std::ostringstream out;
  TrainResult result = train(config, ctx, options, out);
  if (log) *log = out.str();
  return result;
}

std::string checkpoint_file(const Config& config, int64_t step, const std::string& name) {
  return read_file(checkpoint_dir(config.checkpoint.dir, step) + "/" + name);
}

// The training curve without the timing fields, which differ run to run.
std::vector<std::string> curve(const Config& config) {
  std::vector<std::string> lines;
  for (nlohmann::json record : metrics_of(config, "train")) {
    record.erase("utt_per_s");
    record.erase("audio_s_per_s");
    record.erase("elapsed_s");
    record.erase("loader_cpu_ms");
    record.erase("step_ms");
    lines.push_back(record.dump());
  }
  return lines;
}

void expect_same_run(const Config& a, const Config& b, int64_t final_step) {
  EXPECT_EQ(curve(a), curve(b));
  EXPECT_EQ(checkpoint_file(a, final_step, kModelFile), checkpoint_file(b, final_step, kModelFile));
  EXPECT_EQ(checkpoint_file(a, final_step, kOptimizerFile),
            checkpoint_file(b, final_step, kOptimizerFile));
}

class ResumeTest : public ::testing::TestWithParam<int64_t> {};

TEST_P(ResumeTest, StoppedAndResumedRunRepeatsTheUninterruptedOne) {
  // 12 utterances in batches of 2, 2 micro-batches per step: 3 steps an
  // epoch, 9 steps in 3 epochs; steps 4 and 5 are inside epoch 1, 3 ends epoch 0.
  const std::vector<std::string> overrides = {"--batching.batch_size=2",
                                              "--training.accumulation=2", "--training.epochs=3",
                                              "--data.speed_perturb=true"};
  const int64_t stop = GetParam();
  const Config whole = tiny_config(fresh_dir("resume_whole_" + std::to_string(stop)), overrides);
  const Config split = tiny_config(fresh_dir("resume_split_" + std::to_string(stop)), overrides);

  const TrainResult whole_result = run(whole);
  EXPECT_TRUE(whole_result.finished);
  EXPECT_EQ(whole_result.step, 9);

  TrainOptions stop_early;
  stop_early.stop_at_step = stop;
  const TrainResult first = run(split, stop_early);
  EXPECT_FALSE(first.finished);
  EXPECT_EQ(first.step, stop);
  std::string log;
  const TrainResult second = run(split, {}, &log);
  EXPECT_TRUE(second.finished);
  EXPECT_NE(log.find("resumed from " + checkpoint_dir(split.checkpoint.dir, stop)),
            std::string::npos)
      << log;

  ASSERT_EQ(curve(whole).size(), 9u);
  expect_same_run(whole, split, 9);
  // Dropout and SpecAugment are on, so the losses differ step to step; a
  // resume that replayed the wrong batches or seeds could not match them.
  const std::vector<nlohmann::json> records = metrics_of(whole, "train");
  EXPECT_NE(records[3]["loss"], records[4]["loss"]);
}

INSTANTIATE_TEST_SUITE_P(StopSteps, ResumeTest, ::testing::Values(3, 4));

TEST(TrainerTest, CorruptNewestCheckpointIsReportedAndThePreviousOneResumed) {
  const Config whole = tiny_config(fresh_dir("corrupt_whole"));
  const Config damaged = tiny_config(fresh_dir("corrupt_damaged"));
  run(whole);
  run(damaged);
  const std::string model = checkpoint_dir(damaged.checkpoint.dir, 8) + "/" + kModelFile;
  std::string bytes = read_file(model);
  bytes[bytes.size() / 2] ^= 0x40;
  write_file_synced(model, bytes);

  // Training has ended, but step 8 is unusable: the run resumes from step 4,
  // trains steps 5..8 again and writes step 8 anew. What is wrong with step
  // 8 goes to stderr, the progress to the log.
  std::string log;
  ::testing::internal::CaptureStderr();
  const TrainResult result = run(damaged, {}, &log);
  const std::string errors = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(result.finished);
  EXPECT_NE(errors.find("step-00000008 is not intact"), std::string::npos) << errors;
  EXPECT_EQ(log.find("is not intact"), std::string::npos) << log;
  EXPECT_NE(log.find("resumed from " + checkpoint_dir(damaged.checkpoint.dir, 4)),
            std::string::npos)
      << log;
  expect_same_run(whole, damaged, 8);
}

// When every checkpoint is corrupt, train stops (exit 4) instead of starting
// over and writing over them; --checkpoint.resume=never starts over.
TEST(TrainerTest, EveryCheckpointCorruptStopsInsteadOfStartingOver) {
  const Config config = tiny_config(fresh_dir("all_corrupt"));
  run(config);
  const std::vector<int64_t> steps = step_folders(config.checkpoint.dir);
  ASSERT_GE(steps.size(), 2u);
  std::vector<std::string> damaged;
  for (int64_t step : steps) {
    const std::string model = checkpoint_dir(config.checkpoint.dir, step) + "/" + kModelFile;
    std::string bytes = read_file(model);
    bytes[bytes.size() / 2] ^= 0x40;
    write_file_synced(model, bytes);
    damaged.push_back(bytes);
  }
  try {
    run(config);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kCheckpoint);
    EXPECT_NE(std::string(e.what()).find("no checkpoint in " + config.checkpoint.dir +
                                         " can be resumed: " + std::to_string(steps.size()) +
                                         " step folder(s) are not intact"),
              std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("start over on purpose with --checkpoint.resume=never"),
              std::string::npos)
        << e.what();
  }
  EXPECT_EQ(step_folders(config.checkpoint.dir), steps);  // left as they were
  for (size_t i = 0; i < steps.size(); ++i) {
    EXPECT_EQ(checkpoint_file(config, steps[i], kModelFile), damaged[i]) << steps[i];
  }

  const Config over = tiny_config(config.output.dir, {"--checkpoint.resume=never"});
  std::string log;
  EXPECT_TRUE(run(over, {}, &log).finished);
  EXPECT_NE(log.find("starting from scratch"), std::string::npos) << log;
}

// An utterance too short for the model is found at start-up, named by file
// and line (it used to stop training mid-run with "batch of 6 frames leaves
// no frame after subsampling"), and dropped with data.skip_bad.
TEST(TrainerTest, ShortUtterancesAreFoundAtStartUp) {
  const std::string dir = fresh_dir("short_utterance");
  write_audio(dir + "/short.wav", std::vector<float>(800, 0.1f), 1, 16000);  // 0.05 s
  const std::string manifest = dir + "/train.tsv";
  std::string lines = read_file(testing::corpus_dir() + "/train.tsv");
  std::string absolute;
  for (std::istringstream in(lines); std::getline(in, lines);) {
    absolute += testing::corpus_dir() + "/" + lines + "\n";
  }
  write_file_synced(manifest, absolute + dir + "/short.wav\tab\n");
  const std::vector<std::string> overrides = {"--data.train_manifest=" + manifest,
                                              "--batching.batch_size=1"};
  std::string log;
  try {
    run(tiny_config(dir + "/run", overrides), {}, &log);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
    EXPECT_NE(std::string(e.what()).find(manifest + ":13: audio file '" + dir +
                                         "/short.wav': too short: 0.050 s gives 5 feature frames"),
              std::string::npos)
        << e.what();
  }
  std::vector<std::string> skip = overrides;
  skip.push_back("--data.skip_bad=true");
  EXPECT_TRUE(run(tiny_config(dir + "/skip", skip), {}, &log).finished);
  EXPECT_NE(
      log.find("train: dropped 1 utterances too short for the model:\n  " + manifest + ":13:"),
      std::string::npos)
      << log;
}

TEST(TrainerTest, ConfigOverridesReachTheTrainingState) {
  const Config config =
      tiny_config(fresh_dir("overrides"),
                  {"--schedule.type=constant", "--schedule.warmup_steps=0", "--optimizer.lr=0.0025",
                   "--training.max_steps=3", "--model.d_model=48", "--model.n_heads=4"});
  const TrainResult result = run(config);
  EXPECT_EQ(result.step, 3);

  const std::vector<nlohmann::json> records = metrics_of(config, "train");
  ASSERT_EQ(records.size(), 3u);
  for (const nlohmann::json& record : records) EXPECT_EQ(record["lr"].get<double>(), 0.0025);

  const CheckpointFiles files = read_checkpoint(config.checkpoint.dir, 3);
  EXPECT_EQ(files.state["step"], 3);
  EXPECT_EQ(files.state["schedule"]["total_steps"], 3);
  EXPECT_EQ(files.state["config_hash"], hash_hex(config_hash(config)));
  EXPECT_EQ(files.files.at(kConfigFile), dump_config(config));
  EXPECT_EQ(load_config(checkpoint_dir(config.checkpoint.dir, 3) + "/" + kConfigFile), config);

  const NamedTensors weights =
      tensors_from_safetensors(files.files.at(kModelFile), "model.safetensors");
  EXPECT_EQ(weights.at("encoder.layers.0.norm_out.weight").shape, std::vector<int64_t>{48});
}

// A reader of the safetensors format written from its definition: u64
// little-endian header length N, N bytes of JSON, then the data.
struct RawTensor {
  std::string dtype;
  std::vector<int64_t> shape;
  std::vector<float> values;
};
std::map<std::string, RawTensor> read_safetensors_independently(const std::string& bytes,
                                                                nlohmann::json& metadata) {
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = header_length << 8 | uint8_t(bytes[size_t(i)]);
  EXPECT_LE(8 + header_length, bytes.size());
  const nlohmann::json header = nlohmann::json::parse(bytes.substr(8, header_length));
  const size_t data_start = 8 + header_length;
  std::map<std::string, RawTensor> tensors;
  uint64_t covered = 0;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      metadata = entry;
      continue;
    }
    RawTensor tensor;
    tensor.dtype = entry["dtype"];
    tensor.shape = entry["shape"].get<std::vector<int64_t>>();
    const uint64_t begin = entry["data_offsets"][0], end = entry["data_offsets"][1];
    EXPECT_LE(data_start + end, bytes.size()) << name;
    tensor.values.resize((end - begin) / 4);
    std::memcpy(tensor.values.data(), bytes.data() + data_start + begin, end - begin);
    covered += end - begin;
    tensors[name] = std::move(tensor);
  }
  EXPECT_EQ(data_start + covered, bytes.size()) << "the tensors do not tile the data";
  return tensors;
}

TEST(TrainerTest, ModelSafetensorsHoldsTheModelUnderPyTorchNames) {
  const Config config = tiny_config(fresh_dir("safetensors"), {"--training.max_steps=2"});
  run(config);
  const CheckpointFiles files = read_checkpoint(config.checkpoint.dir, 2);
  nlohmann::json metadata;
  const std::map<std::string, RawTensor> tensors =
      read_safetensors_independently(files.files.at(kModelFile), metadata);
  EXPECT_EQ(metadata["format"], "pt");

  // Shapes from the model's own registry: every parameter, nothing else.
  const ConformerConfig model_config = conformer_config(config, 7);  // blank, space, a-e
  // The architecture is in the metadata, for loaders elsewhere (scripts/pytorch).
  const nlohmann::json architecture =
      nlohmann::json::parse(metadata["conformer"].get<std::string>());
  EXPECT_EQ(architecture["d_model"], model_config.d_model);
  EXPECT_EQ(architecture["n_heads"], model_config.n_heads);
  EXPECT_EQ(architecture["n_layers"], model_config.n_layers);
  EXPECT_EQ(architecture["vocab_size"], 7);
  EXPECT_EQ(architecture["conv_kernel"], model_config.conv_kernel);
  CpuBackend<float> backend(1);
  Conformer<float, float> model(backend, model_config, 1, 16, 0);
  EXPECT_EQ(tensors.size(), model.params().infos().size());
  int64_t total = 0;
  const std::regex pytorch_name(R"(^[a-z_0-9]+(\.[a-z_0-9]+)*\.(weight|bias)$)");
  for (const ParameterInfo& info : model.params().infos()) {
    ASSERT_TRUE(tensors.count(info.name)) << info.name;
    const RawTensor& tensor = tensors.at(info.name);
    EXPECT_EQ(tensor.dtype, "F32") << info.name;
    EXPECT_EQ(tensor.shape, info.shape) << info.name;
    EXPECT_TRUE(std::regex_match(info.name, pytorch_name)) << info.name;
    total += int64_t(tensor.values.size());
  }
  EXPECT_EQ(total, count_parameters(model_config));
  EXPECT_TRUE(tensors.count("ctc_head.weight"));

  // The values are the trainer's: the checkpoint's library reader agrees, and
  // training moved the layer norms off their initial 1.
  const NamedTensors library = tensors_from_safetensors(files.files.at(kModelFile), "model");
  for (const auto& [name, tensor] : tensors) EXPECT_EQ(tensor.values, library.at(name).data);
  const std::vector<float>& norm = tensors.at("encoder.layers.0.norm_out.weight").values;
  EXPECT_NE(std::count(norm.begin(), norm.end(), 1.0f), int64_t(norm.size()));
}

// checkpoint.every_steps = 0 writes the last step's checkpoint only: not
// the one of step 2, whose validation, the first, improves on none (it
// used to write steps 2 and 4). `best` names step 4 when its validation was
// the best, and nothing otherwise.
TEST(TrainerTest, CheckpointEveryZeroStepsWritesTheLastStepsOnly) {
  const Config config = tiny_config(
      fresh_dir("every_zero"),
      {"--checkpoint.every_steps=0", "--validation.every_steps=2", "--training.max_steps=4"});
  std::string log;
  EXPECT_TRUE(run(config, {}, &log).finished);
  std::vector<int64_t> validated;
  for (const nlohmann::json& record : metrics_of(config, "valid")) {
    validated.push_back(record["step"].get<int64_t>());
  }
  EXPECT_EQ(validated, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(step_folders(config.checkpoint.dir), std::vector<int64_t>{4});
  EXPECT_EQ(read_checkpoint_pointer(config.checkpoint.dir, "latest"), 4);
  const nlohmann::json state = nlohmann::json::parse(checkpoint_file(config, 4, "state.json"));
  const int64_t best_step = state["best_step"].get<int64_t>();
  ASSERT_TRUE(best_step == 2 || best_step == 4) << best_step;
  EXPECT_EQ(read_checkpoint_pointer(config.checkpoint.dir, "best"),
            best_step == 4 ? std::optional<int64_t>(4) : std::nullopt);
  EXPECT_NE(log.find("at step " + std::to_string(best_step) +
                     (best_step == 4 ? " (" + checkpoint_dir(config.checkpoint.dir, 4) + ")"
                                     : std::string(" (no checkpoint of it kept)"))),
            std::string::npos)
      << log;
}

// The checkpoint of `step`'s tensor `name` (model.safetensors, or
// optimizer.safetensors for adam_m.* and adam_v.*).
std::vector<float> checkpoint_tensor(const Config& config, int64_t step, const std::string& name) {
  const std::string file = name.rfind("adam_", 0) == 0 ? kOptimizerFile : kModelFile;
  return tensors_from_safetensors(checkpoint_file(config, step, file), file).at(name).data;
}

TEST(TrainerTest, DiagnosticLinesHoldWhatTheStepSawAndComputed) {
  // One batch of all 12 utterances a step, 3 steps; nothing random (no
  // dropout, dither or SpecAugment) and no clipping, so that step 1's
  // gradient g is in AdamW's moments after it: m = (1 - beta1) g,
  // v = (1 - beta2) g^2.
  const Config config = tiny_config(
      fresh_dir("diagnostics"),
      {"--batching.batch_size=12", "--features.dither=0", "--spec_augment.enabled=false",
       "--model.dropout=0", "--optimizer.clip_norm=0", "--training.epochs=3",
       "--validation.every_steps=0", "--checkpoint.every_steps=1", "--output.diagnostic_steps=2"});
  TrainOptions initial;
  initial.stop_at_step = 0;
  run(config, initial);
  run(config);
  const std::vector<nlohmann::json> lines = metrics_of(config, "diagnostics");
  ASSERT_EQ(lines.size(), 2u);
  const std::vector<nlohmann::json> train = metrics_of(config, "train");
  ASSERT_EQ(train.size(), 3u);
  for (int64_t step : {1, 2}) {
    const nlohmann::json& line = lines[size_t(step - 1)];
    EXPECT_EQ(line["step"], step);
    // The warmup of 2 steps to 3e-3.
    EXPECT_FLOAT_EQ(line["lr"].get<float>(), float(3e-3 * double(step) / 2));
    // The bias the step's forward used: the checkpoint before it.
    EXPECT_EQ(line["blank_bias"].get<double>(),
              checkpoint_tensor(config, step - 1, "ctc_head.bias")[0]);
    // The norm the step control computed for the progress line.
    EXPECT_NEAR(line["grad_norm"].get<double>(), train[size_t(step - 1)]["grad_norm"].get<double>(),
                1e-5 * line["grad_norm"].get<double>());
  }

  const nlohmann::json& first = lines[0];
  const double beta1 = config.optimizer.beta1, beta2 = config.optimizer.beta2;
  EXPECT_NEAR(first["blank_bias_grad"].get<double>(),
              checkpoint_tensor(config, 1, "adam_m.ctc_head.bias")[0] / (1 - beta1),
              1e-5 * std::abs(first["blank_bias_grad"].get<double>()));
  // Each part's norm from the second moments of the tensors named after it.
  const CheckpointFiles files = read_checkpoint(config.checkpoint.dir, 1);
  const NamedTensors moments = tensors_from_safetensors(files.files.at(kOptimizerFile), "adam");
  std::map<std::string, double> squares;
  for (const auto& [name, tensor] : moments) {
    if (name.rfind("adam_v.", 0) != 0) continue;
    const std::string tensor_name = name.substr(7);
    std::smatch part;
    ASSERT_TRUE(
        std::regex_search(tensor_name, part,
                          std::regex(R"(^(encoder\.subsampling|encoder\.layers\.\d+|ctc_head)\.)")))
        << tensor_name;
    for (float v : tensor.data) squares[part[1]] += double(v) / (1 - beta2);
  }
  const nlohmann::json& norms = first["grad_norms"];
  ASSERT_EQ(norms.size(), squares.size());
  ASSERT_EQ(norms.size(), size_t(conformer_preset("tiny").n_layers) + 2);
  for (const auto& [part, sum] : squares) {
    ASSERT_TRUE(norms.contains(part)) << part;
    EXPECT_NEAR(norms[part].get<double>(), std::sqrt(sum), 1e-5 * std::sqrt(sum)) << part;
  }

  // The blank statistics: the model of step 0 decoding the same 12 utterances.
  std::ostringstream quiet;
  const CheckpointModel before =
      load_checkpoint_model(checkpoint_dir(config.checkpoint.dir, 0), quiet, quiet);
  const Manifest manifest =
      load_dataset(config, config.data.train_manifest, "train", DatasetOptions{}, nullptr);
  double frames = 0, posterior = 0, argmax = 0;
  const int V = before.model_config.vocab_size;
  const BatchOutputs outputs = [&](const Batch& batch, const std::vector<float>& logprobs,
                                   const std::vector<int32_t>& lengths) {
    const size_t T2 = logprobs.size() / size_t(batch.batch_size * V);
    for (int b = 0; b < batch.batch_size; ++b) {
      for (int t = 0; t < lengths[size_t(b)]; ++t) {
        const float* row = logprobs.data() + (size_t(b) * T2 + size_t(t)) * size_t(V);
        frames += 1;
        posterior += std::exp(double(row[0]));
        argmax += std::max_element(row, row + V) == row ? 1 : 0;
      }
    }
  };
  recognize(before, manifest, mpi::Context::world(), 1, quiet, nullptr, outputs);
  EXPECT_EQ(first["frames"].get<double>(), frames);
  EXPECT_NEAR(first["blank_posterior"].get<double>(), posterior / frames, 1e-5);
  EXPECT_EQ(first["blank_argmax"].get<double>(), argmax / frames);
}

TEST(TrainerTest, PriorBiasStartsTheHeadAtTheOutputPriorOfTrain) {
  const Config prior = tiny_config(fresh_dir("prior_bias"), {"--model.prior_bias=true"});
  const Config plain = tiny_config(fresh_dir("prior_bias_off"));
  TrainOptions initial;
  initial.stop_at_step = 0;
  run(prior, initial);
  run(plain, initial);
  const std::vector<float> bias = checkpoint_tensor(prior, 0, "ctc_head.bias");
  const Manifest train =
      load_dataset(prior, prior.data.train_manifest, "train", DatasetOptions{}, nullptr);
  const std::unique_ptr<Tokenizer> tokenizer = load_tokenizer(prior.tokenizer.model_path);
  const Fbank fbank(fbank_options(prior.features, FeatureUse::kTraining));
  const std::vector<double> log_prior = output_log_prior(train, *tokenizer, fbank);
  ASSERT_EQ(bias.size(), log_prior.size());
  double total = 0;
  for (size_t id = 0; id < bias.size(); ++id) {
    EXPECT_EQ(bias[id], float(log_prior[id])) << "output " << id;
    total += std::exp(double(bias[id]));
  }
  // Every output is a character of the transcripts: the shares sum to 1.
  EXPECT_NEAR(total, 1.0, 1e-6);
  EXPECT_GT(bias[0], std::log(0.5));  // the blank takes most frames
  // Only the biases differ from the run without it.
  EXPECT_NE(bias, checkpoint_tensor(plain, 0, "ctc_head.bias"));
  EXPECT_EQ(checkpoint_tensor(prior, 0, "ctc_head.weight"),
            checkpoint_tensor(plain, 0, "ctc_head.weight"));
}

TEST(TrainerTest, SpentTimeBudgetEndsTrainingAndStaysSpentOnResume) {
  const Config whole = tiny_config(fresh_dir("budget_whole"));
  const std::string dir = fresh_dir("budget");
  // A budget of a few nanoseconds is spent before the first step begins.
  const Config spent = tiny_config(dir, {"--training.max_minutes=1e-10"});
  run(whole);

  std::string log;
  TrainResult result = run(spent, {}, &log);
  EXPECT_TRUE(result.finished);
  EXPECT_EQ(result.step, 1);
  EXPECT_NE(log.find("training.max_minutes = 1e-10 spent after step 1"), std::string::npos) << log;
  const std::vector<nlohmann::json> train_lines = metrics_of(spent, "train");
  const std::vector<nlohmann::json> valid_lines = metrics_of(spent, "valid");
  ASSERT_EQ(train_lines.size(), 1u);
  ASSERT_EQ(valid_lines.size(), 1u);  // the last step is validated
  EXPECT_EQ(valid_lines[0]["step"], 1);
  const double step1_seconds = valid_lines[0]["elapsed_s"].get<double>();
  EXPECT_GT(train_lines[0]["elapsed_s"].get<double>(), 0.0);
  EXPECT_LE(train_lines[0]["elapsed_s"].get<double>(), step1_seconds);
  EXPECT_GE(read_checkpoint(spent.checkpoint.dir, 1).state["train_seconds"].get<double>(),
            step1_seconds);

  // Spent for good: the same command trains nothing.
  result = run(spent, {}, &log);
  EXPECT_TRUE(result.finished);
  EXPECT_EQ(result.step, 1);
  EXPECT_NE(log.find("nothing to train: the checkpoint at step 1 has trained for"),
            std::string::npos)
      << log;
  EXPECT_FALSE(std::filesystem::exists(checkpoint_dir(spent.checkpoint.dir, 2)));

  // The time spent is the checkpoint's: with two hours recorded, an hour's
  // budget is spent and a day's is not, and counts on from two hours.
  const std::string state_path = checkpoint_dir(spent.checkpoint.dir, 1) + "/state.json";
  nlohmann::json state = nlohmann::json::parse(read_file(state_path));
  state["train_seconds"] = 7200.0;
  write_file_synced(state_path, state.dump());
  const Config hour = tiny_config(dir, {"--training.max_minutes=60"});
  result = run(hour, {}, &log);
  EXPECT_EQ(result.step, 1);
  EXPECT_NE(log.find("nothing to train: the checkpoint at step 1 has trained for 2h00m, "
                     "training.max_minutes is 60"),
            std::string::npos)
      << log;
  const Config day = tiny_config(dir, {"--training.max_minutes=1440"});
  result = run(day, {}, &log);
  EXPECT_TRUE(result.finished);
  EXPECT_EQ(result.step, 8);
  const std::vector<nlohmann::json> resumed = metrics_of(day, "train");
  ASSERT_EQ(resumed.size(), 8u);
  EXPECT_GE(resumed[1]["elapsed_s"].get<double>(), 7200.0);
  for (size_t i = 1; i < resumed.size(); ++i) {
    EXPECT_GE(resumed[i]["elapsed_s"].get<double>(), resumed[i - 1]["elapsed_s"].get<double>());
  }
  expect_same_run(whole, day, 8);
}

}  // namespace
}  // namespace mpiasr
