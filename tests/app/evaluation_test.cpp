// Evaluation batching: over all ranks every utterance is decoded exactly once,
// every batch keeps the training budget, each rank's batches hold similar
// lengths; the planning bound on batch size holds for every batch the
// sampler makes and is reached.
#include "src/evaluation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "io/sampler.h"

namespace mpiasr {
namespace {

std::vector<double> random_durations(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> seconds(0.5, 12.0);
  std::vector<double> durations(n);
  for (double& d : durations) d = seconds(rng);
  return durations;
}

BatchingConfig dynamic_batching(double seconds, int utterances) {
  BatchingConfig batching;
  batching.mode = BatchMode::kDynamic;
  batching.max_batch_seconds = seconds;
  batching.max_batch_utterances = utterances;
  return batching;
}

TEST(EvaluationBatchesTest, EveryUtteranceOnceWithinTheBudget) {
  const std::vector<double> durations = random_durations(103, 1);
  for (int world : {1, 2, 3, 8}) {
    for (const BatchingConfig& batching : {dynamic_batching(40, 6), dynamic_batching(12, 64)}) {
      std::vector<int> seen(durations.size(), 0);
      for (int rank = 0; rank < world; ++rank) {
        for (const auto& batch : evaluation_batches(durations, batching, rank, world)) {
          ASSERT_FALSE(batch.empty());
          EXPECT_LE(int(batch.size()), batching.max_batch_utterances);
          double longest = 0;
          for (size_t i : batch) longest = std::max(longest, durations[i]);
          EXPECT_TRUE(batch.size() == 1 || batch.size() * longest <= batching.max_batch_seconds);
          for (size_t i : batch) ++seen[i];
        }
      }
      EXPECT_EQ(std::count(seen.begin(), seen.end(), 1), int64_t(durations.size()))
          << "world " << world;
    }
  }
}

TEST(EvaluationBatchesTest, FixedModeCutsBatchSize) {
  BatchingConfig batching;
  batching.mode = BatchMode::kFixed;
  batching.batch_size = 4;
  const auto batches = evaluation_batches(random_durations(10, 2), batching, 0, 1);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].size(), 4u);
  EXPECT_EQ(batches[2].size(), 2u);
}

TEST(EvaluationBatchesTest, AnUtteranceOverTheBudgetGetsABatchOfItsOwn) {
  const auto batches = evaluation_batches({30.0, 2.0, 2.0}, dynamic_batching(10, 8), 0, 1);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0], std::vector<size_t>{0});
  EXPECT_EQ(batches[1], (std::vector<size_t>{1, 2}));
}

TEST(MaxBatchUtterancesTest, BoundsEverySamplerBatchAndIsReached) {
  const std::vector<double> durations = random_durations(400, 3);
  for (const BatchingConfig& batching : {dynamic_batching(60, 32), dynamic_batching(200, 16)}) {
    const int bound = max_batch_utterances(durations, batching);
    SamplerOptions options;
    options.mode = "dynamic";
    options.max_batch_seconds = batching.max_batch_seconds;
    options.max_batch_utterances = batching.max_batch_utterances;
    options.num_buckets = 1;  // one bucket: the shortest utterances can share a batch
    size_t largest = 0;
    for (int epoch = 0; epoch < 20; ++epoch) {
      for (const auto& batch : Sampler(durations, options, 0, 1).epoch_batches(epoch)) {
        EXPECT_LE(int(batch.size()), bound);
        largest = std::max(largest, batch.size());
      }
    }
    // The k shortest utterances together fit, so a batch that size is possible.
    std::vector<double> sorted = durations;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_LE(double(bound) * sorted[size_t(bound - 1)], batching.max_batch_seconds);
    EXPECT_TRUE(bound == batching.max_batch_utterances ||
                double(bound + 1) * sorted[size_t(bound)] > batching.max_batch_seconds);
    EXPECT_GT(largest, 0u);
  }
}

TEST(MaxFeatureFramesTest, CoversTheLongestUtterance) {
  Fbank fbank(FbankOptions{});
  const int frames = max_feature_frames({1.0, 3.2, 2.0}, fbank);
  EXPECT_GE(frames, fbank.num_frames(size_t(3.2 * 16000)));
  EXPECT_LE(frames, fbank.num_frames(size_t(3.3 * 16000)));
}

}  // namespace
}  // namespace mpiasr
