// CMVN: statistics against a two-pass mean/variance, normalized features with
// mean 0 and variance 1, merge of shards equal to one pass over everything,
// the JSON round trip and its errors, the std floor, per-utterance CMVN.
#include "io/cmvn.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <unistd.h>

#include <gtest/gtest.h>

#include "src/base/error.h"

namespace mpiasr {
namespace {

constexpr int kMels = 8;

// frames x kMels features; bin j ~ N(-10 + j, (0.5 + j)^2).
std::vector<float> random_features(int frames, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> feats(static_cast<size_t>(frames) * kMels);
  for (int t = 0; t < frames; ++t)
    for (int j = 0; j < kMels; ++j)
      feats[t * kMels + j] =
          static_cast<float>(std::normal_distribution<double>(-10.0 + j, 0.5 + j)(rng));
  return feats;
}

// Per-bin mean and variance (population), two passes in double.
void two_pass(const std::vector<float>& feats, std::vector<double>& mean,
              std::vector<double>& variance) {
  const size_t frames = feats.size() / kMels;
  mean.assign(kMels, 0.0);
  variance.assign(kMels, 0.0);
  for (size_t t = 0; t < frames; ++t)
    for (int j = 0; j < kMels; ++j) mean[j] += feats[t * kMels + j] / static_cast<double>(frames);
  for (size_t t = 0; t < frames; ++t)
    for (int j = 0; j < kMels; ++j)
      variance[j] += std::pow(feats[t * kMels + j] - mean[j], 2) / static_cast<double>(frames);
}

// A file name of this process and test in the temporary directory.
std::string temporary_path(const std::string& name) {
  const std::string test = ::testing::UnitTest::GetInstance()->current_test_info()->name();
  return (std::filesystem::temp_directory_path() /
          ("mpiasr_" + test + "_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

TEST(Cmvn, StatisticsMatchTwoPassAndNormalize) {
  std::vector<float> feats = random_features(5000, 1);
  CmvnStats stats;
  stats.accumulate(feats.data(), 5000, kMels);
  EXPECT_EQ(stats.frames, 5000);
  const Cmvn cmvn = Cmvn::from_stats(stats);
  std::vector<double> mean, variance;
  two_pass(feats, mean, variance);
  for (int j = 0; j < kMels; ++j) {
    EXPECT_NEAR(cmvn.mean[j], mean[j], 1e-5 * std::abs(mean[j]));
    EXPECT_NEAR(cmvn.inv_std[j], 1.0 / std::sqrt(variance[j]), 1e-5 / std::sqrt(variance[j]));
  }
  cmvn.apply(feats.data(), 5000, kMels);
  two_pass(feats, mean, variance);
  for (int j = 0; j < kMels; ++j) {
    EXPECT_NEAR(mean[j], 0.0, 1e-5) << j;
    EXPECT_NEAR(variance[j], 1.0, 1e-4) << j;
  }
}

TEST(Cmvn, MergedShardsEqualOnePass) {
  const std::vector<float> feats = random_features(3000, 2);
  CmvnStats all;
  all.accumulate(feats.data(), 3000, kMels);
  // Three "ranks" with unequal shards, merged in a different order, plus an empty one.
  CmvnStats rank0, rank1, rank2, empty, merged;
  rank0.accumulate(feats.data(), 1000, kMels);
  rank1.accumulate(feats.data() + 1000 * kMels, 1500, kMels);
  rank2.accumulate(feats.data() + 2500 * kMels, 500, kMels);
  merged.merge(rank2);
  merged.merge(empty);
  merged.merge(rank0);
  merged.merge(rank1);
  EXPECT_EQ(merged.frames, all.frames);
  for (int j = 0; j < kMels; ++j) {
    EXPECT_NEAR(merged.sum[j], all.sum[j], 1e-12 * std::abs(all.sum[j]));
    EXPECT_NEAR(merged.sum_sq[j], all.sum_sq[j], 1e-12 * all.sum_sq[j]);
  }
  CmvnStats other_size;
  std::vector<float> wide(10, 1.0f);
  other_size.accumulate(wide.data(), 1, 10);
  EXPECT_THROW(merged.merge(other_size), Error);
  EXPECT_THROW(merged.accumulate(wide.data(), 1, 10), Error);
}

TEST(Cmvn, SaveLoadRoundTripIsExact) {
  const std::vector<float> feats = random_features(777, 3);
  CmvnStats stats;
  stats.accumulate(feats.data(), 777, kMels);
  const std::string path = temporary_path("cmvn_roundtrip.json");
  stats.save(path);
  const CmvnStats loaded = CmvnStats::load(path);
  EXPECT_EQ(loaded.frames, stats.frames);
  EXPECT_EQ(loaded.sum, stats.sum);
  EXPECT_EQ(loaded.sum_sq, stats.sum_sq);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  std::filesystem::remove(path);
}

void expect_load_error(const std::string& contents, const std::string& mention) {
  const std::string path = temporary_path("cmvn_bad.json");
  std::ofstream(path) << contents;
  try {
    CmvnStats::load(path);
    ADD_FAILURE() << "loaded " << contents;
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
    EXPECT_NE(what.find(path), std::string::npos) << what;
    EXPECT_NE(what.find(mention), std::string::npos) << what;
  }
  std::filesystem::remove(path);
}

TEST(Cmvn, LoadNamesTheFileAndTheFault) {
  expect_load_error("{\"n_mels\": 2, \"frames\": 3, \"sum\": [1, 2]", "line 1");
  expect_load_error("{\"n_mels\": 2, \"frames\": 3, \"sum\": [1, 2]}", "sum_sq");
  expect_load_error("{\"n_mels\": 2, \"frames\": 3, \"sum\": [1, 2], \"sum_sq\": [1]}",
                    "sum_sq 1 values");
  expect_load_error("{\"n_mels\": 2, \"frames\": 3, \"sum\": [1, 2], \"sum_sq\": [1, -4]}",
                    "bin 1");
  expect_load_error("{\"n_mels\": 1, \"frames\": -3, \"sum\": [1], \"sum_sq\": [1]}", "frames -3");
  // Statistics no audio gives: no frames, a mean outside the range of logs
  // of floats, a variance below 0 (sum_sq / frames < mean^2) or above the
  // square of half that range.
  expect_load_error("{\"n_mels\": 1, \"frames\": 0, \"sum\": [1], \"sum_sq\": [1]}",
                    "frames 0: statistics of at least one frame are needed");
  expect_load_error("{\"n_mels\": 2, \"frames\": 1, \"sum\": [1, 1e308], \"sum_sq\": [1, 1]}",
                    "bin 1: sum 1e+308 / frames 1 = mean 1e+308, outside [-103.28, 88.73], the "
                    "range of log-mel features");
  expect_load_error("{\"n_mels\": 1, \"frames\": 4, \"sum\": [-420], \"sum_sq\": [1]}",
                    "bin 0: sum -420 / frames 4 = mean -105, outside");
  expect_load_error("{\"n_mels\": 1, \"frames\": 2, \"sum\": [-20], \"sum_sq\": [1]}",
                    "bin 0: sum_sq 1 / frames 2 - mean^2 = variance -99.5, outside [0, ");
  expect_load_error("{\"n_mels\": 1, \"frames\": 1, \"sum\": [0], \"sum_sq\": [1e6]}",
                    "bin 0: sum_sq 1e+06 / frames 1 - mean^2 = variance 1e+06, outside [0, ");
  try {
    CmvnStats::load("/nonexistent/cmvn.json");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/cmvn.json"), std::string::npos);
  }
}

// The plausibility check at load accepts every statistics features can
// have: silence (every frame at the log floor, variance 0 up to rounding)
// and features at the two ends of what a float's log can be.
TEST(Cmvn, LoadAcceptsEveryRangeFeaturesCanHave) {
  const float lowest = std::log(std::numeric_limits<float>::denorm_min());
  const float highest = std::log(std::numeric_limits<float>::max());
  std::vector<float> feats;
  for (int t = 0; t < 1000; ++t) {
    feats.push_back(std::log(1e-10f));          // bin 0: silence
    feats.push_back(t % 2 ? lowest : highest);  // bin 1: the widest spread
  }
  CmvnStats stats;
  stats.accumulate(feats.data(), 1000, 2);
  const std::string path = temporary_path("cmvn_extremes.json");
  stats.save(path);
  const CmvnStats loaded = CmvnStats::load(path);
  EXPECT_EQ(loaded.sum, stats.sum);
  EXPECT_EQ(loaded.sum_sq, stats.sum_sq);
  std::filesystem::remove(path);
}

TEST(Cmvn, ConstantBinUsesTheStdFloor) {
  std::vector<float> feats = {3.0f, 1.0f, 3.0f, 2.0f, 3.0f, 3.0f};  // bin 0 constant
  CmvnStats stats;
  stats.accumulate(feats.data(), 3, 2);
  const Cmvn cmvn = Cmvn::from_stats(stats, 0.5f);
  EXPECT_FLOAT_EQ(cmvn.mean[0], 3.0f);
  EXPECT_FLOAT_EQ(cmvn.inv_std[0], 2.0f);  // 1 / max(0, 0.5)
  EXPECT_FLOAT_EQ(cmvn.mean[1], 2.0f);
  EXPECT_FLOAT_EQ(cmvn.inv_std[1], 1.0f / std::sqrt(2.0f / 3.0f));  // std 0.816 > floor
  cmvn.apply(feats.data(), 3, 2);
  EXPECT_EQ(feats[0], 0.0f);
  EXPECT_EQ(feats[2], 0.0f);
  EXPECT_THROW(Cmvn::from_stats(CmvnStats{}), Error);
  EXPECT_THROW(cmvn.apply(feats.data(), 2, 3), Error);
}

TEST(Cmvn, PerUtteranceGivesZeroMeanUnitVariance) {
  std::vector<float> feats = random_features(400, 4);
  normalize_per_utterance(feats.data(), 400, kMels);
  std::vector<double> mean, variance;
  two_pass(feats, mean, variance);
  for (int j = 0; j < kMels; ++j) {
    EXPECT_NEAR(mean[j], 0.0, 1e-5) << j;
    EXPECT_NEAR(variance[j], 1.0, 1e-4) << j;
  }
  normalize_per_utterance(nullptr, 0, kMels);  // an empty utterance is left alone
}

}  // namespace
}  // namespace mpiasr
