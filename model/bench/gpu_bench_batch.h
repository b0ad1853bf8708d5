// The GPU benchmarks' batch (cuda_train_bench.cu, roofline_timeline_bench.cu):
// 32 utterances of 15 s (1500 frames of 80 mels, N(0, 1) features), each with
// 150 random tokens of a 128-token vocabulary.
#pragma once

#include <cstdint>
#include <random>

#include "model/batch_view.h"

namespace mpiasr {

constexpr int kBatch = 32, kFrames = 1500, kTokens = 150, kVocab = 128;
constexpr double kFramesPerSecond = 100.0;
constexpr double kAudioSeconds = kBatch * kFrames / kFramesPerSecond;  // per batch

inline HostBatch synthetic_batch(uint64_t seed) {
  HostBatch batch;
  batch.batch_size = kBatch;
  batch.max_frames = kFrames;
  batch.n_mels = 80;
  batch.features.resize(size_t(kBatch) * kFrames * batch.n_mels);
  batch.frame_lengths.resize(kBatch);
  batch.target_lengths.resize(kBatch);
  batch.targets.resize(size_t(kBatch) * kTokens);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int32_t> token(1, kVocab - 1);
  for (size_t i = 0; i < batch.features.size(); ++i) batch.features[i] = normal(rng);
  for (size_t i = 0; i < batch.targets.size(); ++i) batch.targets[i] = token(rng);
  for (int b = 0; b < kBatch; ++b) {
    batch.frame_lengths[size_t(b)] = kFrames;
    batch.target_lengths[size_t(b)] = kTokens;
    batch.utterance_indices.push_back(size_t(b));
  }
  return batch;
}

}  // namespace mpiasr
