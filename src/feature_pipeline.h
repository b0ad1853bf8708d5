// The feature pipeline of a run, from the config: log-mel filterbank options,
// the normalization (global CMVN statistics, per-utterance CMVN or none) and
// the loader options (SpecAugment, worker threads, seed).
//
// Training features add the configured speed perturbation, dither and
// SpecAugment; evaluation features (validation, eval, transcribe) use none of
// them, so a hypothesis depends only on the audio and the weights.
#pragma once

#include <optional>
#include <string>

#include "io/cmvn.h"
#include "io/fbank.h"
#include "io/loader.h"
#include "model/batch_view.h"
#include "src/config.h"

namespace mpiasr {

enum class FeatureUse { kTraining, kEvaluation };

// A batch of the loader as the model's input: a view of its buffers.
inline BatchView model_input(const Batch& batch) {
  return {batch.batch_size,
          batch.max_frames,
          batch.n_mels,
          {batch.features.data(), batch.features.size()},
          {batch.frame_lengths.data(), batch.frame_lengths.size()},
          {batch.targets.data(), batch.targets.size()},
          {batch.target_lengths.data(), batch.target_lengths.size()},
          batch.utterance_indices};
}

FbankOptions fbank_options(const FeaturesConfig& features, FeatureUse use);

struct FeaturePipeline {
  // cmvn_path: the global statistics to load when features.cmvn is global
  // (the config's features.cmvn_path, or the copy in a checkpoint).
  FeaturePipeline(const Config& config, FeatureUse use, const std::string& cmvn_path);

  // Null unless features.cmvn is global.
  const Cmvn* global_cmvn() const { return cmvn ? &*cmvn : nullptr; }

  Fbank fbank;
  std::optional<Cmvn> cmvn;
  LoaderOptions loader;
};

}  // namespace mpiasr
