// The model's input: a padded batch in host memory, seen through spans of the
// caller's buffers (nothing is copied or owned; the buffers must outlive the
// call). src/feature_pipeline.h makes one from the loader's Batch.
//
//   features           float [B, T, n_mels]   T = max_frames; rows t >= frame_lengths[b] are
//   padding frame_lengths      int32 [B] targets            int32 [sum target_lengths], utterances
//   concatenated, tokens in [1, V) target_lengths     int32 [B] utterance_indices  [B] or empty:
//   the manifest entry of each utterance, for messages
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace mpiasr {

struct BatchView {
  int batch_size = 0;  // B
  int max_frames = 0;  // T
  int n_mels = 0;
  std::span<const float> features;
  std::span<const int32_t> frame_lengths;
  std::span<const int32_t> targets;
  std::span<const int32_t> target_lengths;
  std::span<const size_t> utterance_indices;
};

// A padded batch that owns its buffers (the fields of BatchView, in vectors),
// for code that builds batches itself: tests and benchmarks.
struct HostBatch {
  int batch_size = 0;
  int max_frames = 0;
  int n_mels = 80;
  std::vector<float> features;
  std::vector<int32_t> frame_lengths;
  std::vector<int32_t> targets;
  std::vector<int32_t> target_lengths;
  std::vector<size_t> utterance_indices;

  operator BatchView() const {
    return {batch_size,    max_frames, n_mels,         features,
            frame_lengths, targets,    target_lengths, utterance_indices};
  }
};

}  // namespace mpiasr
