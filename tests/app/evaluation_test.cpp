// Evaluation batching: over all ranks every utterance is decoded exactly once,
// every batch keeps the training budget, each rank's batches hold similar
// lengths; the planning bound on batch size holds for every batch the
// sampler makes and is reached.
#include "src/evaluation.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "io/sampler.h"
#include "src/batch_plan.h"

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
        for (const auto& batch : evaluation_batches(durations, batching, rank, world, 1e9)) {
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
  const auto batches = evaluation_batches(random_durations(10, 2), batching, 0, 1, 1e9);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0].size(), 4u);
  EXPECT_EQ(batches[2].size(), 2u);
}

TEST(EvaluationBatchesTest, AnUtteranceOverTheBudgetGetsABatchOfItsOwn) {
  const auto batches = evaluation_batches({30.0, 2.0, 2.0}, dynamic_batching(10, 8), 0, 1, 1e9);
  ASSERT_EQ(batches.size(), 2u);
  EXPECT_EQ(batches[0], std::vector<size_t>{0});
  EXPECT_EQ(batches[1], (std::vector<size_t>{1, 2}));
}

// An utterance longer than the decode window is alone in its batch, however
// much of the budget is left.
TEST(EvaluationBatchesTest, AnUtteranceOverTheWindowIsAlone) {
  const auto batches =
      evaluation_batches({3.0, 2.5, 2.0, 1.0}, dynamic_batching(100, 8), 0, 1, 2.2);
  ASSERT_EQ(batches.size(), 3u);
  EXPECT_EQ(batches[0], std::vector<size_t>{0});
  EXPECT_EQ(batches[1], std::vector<size_t>{1});
  EXPECT_EQ(batches[2], (std::vector<size_t>{2, 3}));
}

// Every batch the sampler makes fits the plan of sampler_batch_shapes, the
// plan's utterance-frames are the batch budget's (not the most utterances
// times the longest), and a sampler batch reaches them.
TEST(SamplerBatchShapesTest, EverySamplerBatchFitsAndTheBudgetIsTheBound) {
  const Fbank fbank(FbankOptions{});
  const std::vector<double> durations = random_durations(400, 3);
  for (const BatchingConfig& batching : {dynamic_batching(60, 32), dynamic_batching(200, 16)}) {
    const BatchShapes shapes(sampler_batch_shapes(durations, batching, fbank));
    SamplerOptions options;
    options.mode = "dynamic";
    options.max_batch_seconds = batching.max_batch_seconds;
    options.max_batch_utterances = batching.max_batch_utterances;
    options.num_buckets = 1;  // one bucket: the shortest utterances can share a batch
    size_t most_frames = 0;
    for (int epoch = 0; epoch < 20; ++epoch) {
      for (const auto& batch : Sampler(durations, options, 0, 1).epoch_batches(epoch)) {
        double longest = 0;
        for (size_t i : batch) longest = std::max(longest, durations[i]);
        const BatchShape shape{int(batch.size()), max_feature_frames(longest, fbank)};
        EXPECT_TRUE(shapes.fits(shape)) << shape.batch << " x " << shape.frames;
        most_frames = std::max(most_frames, size_t(shape.batch) * size_t(shape.frames));
      }
    }
    // Within the budget's frames (each utterance's frames carry a margin of
    // kSegmentEndTolerance and one sample), and reached within a fifth.
    const double budget_frames = batching.max_batch_seconds * 100;
    EXPECT_LE(double(shapes.input_rows()), budget_frames * 1.05);
    EXPECT_GE(double(most_frames), 0.8 * double(shapes.input_rows()));
    // The plan of "most utterances x longest utterance" it replaces: the k
    // shortest utterances that fit together, times the longest of all.
    std::vector<double> sorted = durations;
    std::sort(sorted.begin(), sorted.end());
    int most = 1;
    for (int k = 1; k <= batching.max_batch_utterances; ++k) {
      if (k * sorted[size_t(k - 1)] <= batching.max_batch_seconds) most = k;
    }
    const double old_plan = double(most) * max_feature_frames(sorted.back(), fbank);
    EXPECT_LE(double(shapes.input_rows()), old_plan);
    // 60 s batches of up to 32: the old plan held 32 x 12 s.
    if (batching.max_batch_seconds == 60) {
      EXPECT_LT(4 * double(shapes.input_rows()), old_plan);
    }
  }
}

TEST(SamplerBatchShapesTest, FixedBatchesAreBatchSizeTimesTheLongest) {
  const Fbank fbank(FbankOptions{});
  BatchingConfig batching;
  batching.mode = BatchMode::kFixed;
  batching.batch_size = 4;
  const std::vector<BatchShape> shapes = sampler_batch_shapes({1.0, 3.2, 2.0}, batching, fbank);
  ASSERT_EQ(shapes.size(), 1u);
  EXPECT_EQ(shapes[0].batch, 3);  // no more than there are
  EXPECT_EQ(shapes[0].frames, max_feature_frames(3.2, fbank));
}

// With batching.frame_multiple the plan holds the padded shapes the loader
// makes: each shape's frames rounded up, its utterances unchanged.
TEST(SamplerBatchShapesTest, FramesArePaddedAsTheLoaderPadsThem) {
  const Fbank fbank(FbankOptions{});
  const std::vector<double> durations = random_durations(200, 5);
  BatchingConfig batching = dynamic_batching(60, 32);
  const std::vector<BatchShape> plain = sampler_batch_shapes(durations, batching, fbank);
  batching.frame_multiple = 64;
  const std::vector<BatchShape> padded = sampler_batch_shapes(durations, batching, fbank);
  ASSERT_EQ(padded.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    EXPECT_EQ(padded[i].batch, plain[i].batch);
    EXPECT_EQ(padded[i].frames, (plain[i].frames + 63) / 64 * 64) << plain[i].frames;
  }
}

TEST(MaxFeatureFramesTest, CoversTheLongestUtterance) {
  Fbank fbank(FbankOptions{});
  const int frames = max_feature_frames(3.2, fbank);
  EXPECT_GE(frames, fbank.num_frames(size_t(3.2 * 16000)));
  EXPECT_LE(frames, fbank.num_frames(size_t(3.3 * 16000)));
}

}  // namespace
}  // namespace mpiasr
