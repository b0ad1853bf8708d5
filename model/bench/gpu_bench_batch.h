// The GPU benchmarks' batch (cuda_train_bench.cu, roofline_timeline_bench.cu):
// by default 32 utterances of 15 s (1500 frames of 80 mels, N(0, 1) features),
// each with a token per 10 frames (150), random in a 128-token vocabulary.
#pragma once

#include <cstdint>
#include <random>

#include "model/batch_view.h"

namespace mpiasr {

constexpr int kBatch = 32, kFrames = 1500, kVocab = 128;
constexpr int kTokens = kFrames / 10;  // per utterance of kFrames
constexpr double kFramesPerSecond = 100.0;
constexpr double kAudioSeconds = kBatch * kFrames / kFramesPerSecond;  // per default batch

inline HostBatch synthetic_batch(int utterances, int frames, uint64_t seed) {
  const int tokens = frames / 10;
  HostBatch batch;
  batch.batch_size = utterances;
  batch.max_frames = frames;
  batch.n_mels = 80;
  batch.features.resize(size_t(utterances) * size_t(frames) * size_t(batch.n_mels));
  batch.frame_lengths.resize(size_t(utterances));
  batch.target_lengths.resize(size_t(utterances));
  batch.targets.resize(size_t(utterances) * size_t(tokens));
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int32_t> token(1, kVocab - 1);
  for (size_t i = 0; i < batch.features.size(); ++i) batch.features[i] = normal(rng);
  for (size_t i = 0; i < batch.targets.size(); ++i) batch.targets[i] = token(rng);
  for (int b = 0; b < utterances; ++b) {
    batch.frame_lengths[size_t(b)] = frames;
    batch.target_lengths[size_t(b)] = tokens;
    batch.utterance_indices.push_back(size_t(b));
  }
  return batch;
}

}  // namespace mpiasr
