// Training end to end in fp32: the tiny model (dropout 0.1) memorizes 8
// utterances of random features with random targets, the token-averaged CTC
// loss falling by at least 90% within 300 AdamW steps, and a second run from
// the same seeds reproduces every loss exactly.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "model/conformer.h"
#include "model/optimizer.h"

namespace mpiasr {
namespace {

constexpr int kUtterances = 8, kMaxFrames = 100, kVocab = 12, kMaxSteps = 300;

HostBatch random_batch() {
  HostBatch batch;
  batch.batch_size = kUtterances;
  batch.max_frames = kMaxFrames;
  batch.n_mels = 80;
  batch.features.resize(size_t(kUtterances) * kMaxFrames * 80);
  batch.frame_lengths.resize(kUtterances);
  batch.target_lengths.resize(kUtterances);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<int32_t> targets;
  for (int b = 0; b < kUtterances; ++b) {
    const int frames = 60 + int(rng() % 41);
    batch.frame_lengths[size_t(b)] = frames;
    for (int t = 0; t < kMaxFrames; ++t) {
      for (int m = 0; m < 80; ++m) {
        batch.features[(size_t(b) * kMaxFrames + size_t(t)) * 80 + size_t(m)] =
            t < frames ? normal(rng) : 0.0f;
      }
    }
    const int tokens = 4 + int(rng() % 3);
    batch.target_lengths[size_t(b)] = tokens;
    for (int u = 0; u < tokens; ++u) targets.push_back(1 + int32_t(rng() % (kVocab - 1)));
  }
  batch.targets.resize(targets.size());
  std::copy(targets.begin(), targets.end(), batch.targets.data());
  return batch;
}

// Trains for `steps` steps, or until the loss is below 10% of the first when
// steps < 0; returns the token-averaged loss of every step.
std::vector<double> train(const HostBatch& batch, int steps) {
  CpuBackend<float> backend(1);
  ConformerConfig config = conformer_preset("tiny");
  config.vocab_size = kVocab;
  Conformer<float, float> model(backend, config, kUtterances, kMaxFrames, 1);
  Optimizer<float, float> optimizer(model.params());
  double tokens = 0.0;
  for (int b = 0; b < batch.batch_size; ++b) tokens += batch.target_lengths[size_t(b)];

  std::vector<double> history;
  for (int step = 0; step < (steps < 0 ? kMaxSteps : steps); ++step) {
    optimizer.zero_grad();
    const std::vector<double> losses =
        model.forward_backward(batch, tokens, 1.0f, false, uint64_t(1000 + step));
    double loss = 0.0;
    for (double l : losses) loss += l;
    history.push_back(loss / tokens);
    optimizer.clip(5.0, optimizer.global_grad_norm());
    const float warmup = std::min(1.0f, float(step + 1) / 20.0f);
    optimizer.step(3e-3f * warmup, 1.0f);
    if (steps < 0 && history.back() <= 0.1 * history.front()) break;
  }
  return history;
}

TEST(Overfit, TinyMemorizesEightUtterancesDeterministically) {
  const HostBatch batch = random_batch();
  const std::vector<double> first = train(batch, -1);
  ASSERT_FALSE(first.empty());
  EXPECT_GT(first.front(), 2.0);
  EXPECT_LE(first.back(), 0.1 * first.front()) << "after " << first.size() << " steps the loss is "
                                               << first.back() << " from " << first.front();
  const std::vector<double> second = train(batch, int(first.size()));
  ASSERT_EQ(second.size(), first.size());
  for (size_t step = 0; step < first.size(); ++step) {
    ASSERT_EQ(second[step], first[step]) << "step " << step;
  }
  RecordProperty("steps_to_90_percent", int(first.size()));
}

}  // namespace
}  // namespace mpiasr
