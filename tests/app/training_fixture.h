// Shared set-up of the trainer tests: MPI for the test process (a world of
// one), a small synthetic corpus on disk and a `tiny` config that trains on
// it in about a second.
//
// The corpus: 12 train and 4 valid utterances of 0.6-1.4 s, noise plus a
// tone whose pitch follows the transcript's first letter, transcripts of 2-3
// short words over "abcde ". Written once under the build folder (into a
// temporary folder renamed into place, since ctest runs tests in parallel);
// the audio is seeded, so every run sees the same files.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "io/audio.h"
#include "io/checkpoint.h"
#include "mpi/context.h"
#include "mpi/runtime.h"
#include "src/base/file.h"
#include "src/config.h"

namespace mpiasr::testing {

// MPI_Init before the first test, MPI_Finalize after the last.
class MpiEnvironment : public ::testing::Environment {
 public:
  void SetUp() override { runtime_ = std::make_unique<mpi::Runtime>(nullptr, nullptr); }
  void TearDown() override { runtime_.reset(); }

 private:
  std::unique_ptr<mpi::Runtime> runtime_;
};

inline const std::string& corpus_dir() {
  static const std::string dir = [] {
    const std::string dir = std::string(MPIASR_BINARY_DIR) + "/app_test_corpus";
    if (std::filesystem::exists(dir + "/valid.tsv")) return dir;
    const std::string root = dir + ".tmp." + std::to_string(::getpid());
    std::filesystem::create_directories(root + "/audio");
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
    const std::vector<std::string> words = {"ab", "cad", "bee", "dab", "ace", "bad", "cab"};
    for (const char* split : {"train", "valid"}) {
      const int count = std::string(split) == "train" ? 12 : 4;
      std::ofstream manifest(root + "/" + split + ".tsv");
      for (int i = 0; i < count; ++i) {
        std::string text = words[size_t(rng() % words.size())];
        for (int w = 0; w < 1 + int(rng() % 2); ++w) text += " " + words[size_t(rng() % 7)];
        const int samples = 16000 * (6 + int(rng() % 9)) / 10;
        const double pitch = 200.0 + 40.0 * (text[0] - 'a');
        std::vector<float> audio(size_t(samples), 0.0f);
        for (int t = 0; t < samples; ++t) {
          audio[size_t(t)] =
              0.3f * float(std::sin(2 * M_PI * pitch * t / 16000.0)) + 0.05f * uniform(rng);
        }
        const std::string name = std::string(split) + "-" + std::to_string(i) + ".wav";
        write_audio(root + "/audio/" + name, audio, 1, 16000);
        manifest << "audio/" << name << "\t" << text << "\n";
      }
    }
    std::error_code taken;  // another process got there first: its files are the same
    std::filesystem::rename(root, dir, taken);
    if (taken) std::filesystem::remove_all(root);
    return dir;
  }();
  return dir;
}

// A fresh (emptied) folder for one test's run.
inline std::string fresh_dir(const std::string& name) {
  const std::string dir = std::string(MPIASR_BINARY_DIR) + "/app_test_runs/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

// `tiny` on the test corpus: fixed batches of 3, 2 epochs (8 steps), every
// source of randomness switched on (dropout, dither, SpecAugment), a
// progress line and a metrics line every step, one thread.
inline Config tiny_config(const std::string& output_dir,
                          const std::vector<std::string>& overrides = {}) {
  std::vector<std::string> args = {
      "--data.train_manifest=" + corpus_dir() + "/train.tsv",
      "--data.valid_manifest=" + corpus_dir() + "/valid.tsv",
      "--batching.mode=fixed",
      "--batching.batch_size=3",
      "--batching.workers=1",
      "--features.dither=0.01",
      "--spec_augment.enabled=true",
      "--spec_augment.time_masks=2",
      "--model.preset=tiny",
      "--model.dropout=0.1",
      "--schedule.type=cosine",
      "--schedule.warmup_steps=2",
      "--optimizer.lr=3e-3",
      "--training.device=cpu",
      "--training.epochs=2",
      "--training.threads=1",
      "--training.log_every=1",
      "--validation.every_steps=3",
      "--checkpoint.every_steps=4",
      "--checkpoint.keep_last=10",
      "--output.dir=" + output_dir,
  };
  args.insert(args.end(), overrides.begin(), overrides.end());
  return load_config("", args);
}

// The metrics file's lines of one kind, parsed.
inline std::vector<nlohmann::json> metrics_of(const Config& config, const std::string& kind) {
  std::vector<nlohmann::json> records;
  std::istringstream lines(read_file(config.output.metrics_file));
  for (std::string line; std::getline(lines, line);) {
    nlohmann::json record = nlohmann::json::parse(line);
    if (record["kind"] == kind) records.push_back(record);
  }
  return records;
}

}  // namespace mpiasr::testing
