// Random padded batches for the model's tests (tests/model, tests/cuda).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "model/batch_view.h"

namespace mpiasr::testing {

// A batch of random features (N(0, 1), padded frames 0) for the given frame
// counts and target sequences, padded to max_frames; utterance b is manifest
// entry first_index + b.
inline HostBatch random_batch(const std::vector<int>& frames,
                              const std::vector<std::vector<int32_t>>& targets, int max_frames,
                              uint64_t seed, size_t first_index) {
  HostBatch batch;
  batch.batch_size = int(frames.size());
  batch.max_frames = max_frames;
  batch.n_mels = 80;
  batch.features.resize(size_t(batch.batch_size) * max_frames * batch.n_mels);
  batch.frame_lengths.resize(frames.size());
  batch.target_lengths.resize(frames.size());
  size_t total = 0;
  for (const auto& t : targets) total += t.size();
  batch.targets.resize(total);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  size_t at = 0;
  for (size_t b = 0; b < frames.size(); ++b) {
    batch.frame_lengths[b] = frames[b];
    batch.target_lengths[b] = int32_t(targets[b].size());
    for (int32_t token : targets[b]) batch.targets[at++] = token;
    for (int t = 0; t < max_frames; ++t) {
      for (int m = 0; m < batch.n_mels; ++m) {
        batch.features[(b * max_frames + size_t(t)) * batch.n_mels + size_t(m)] =
            t < frames[b] ? normal(rng) : 0.0f;
      }
    }
    batch.utterance_indices.push_back(first_index + b);
  }
  return batch;
}

}  // namespace mpiasr::testing
