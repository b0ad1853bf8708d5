// Recognition with a trained checkpoint: `mpiasr eval` and `mpiasr
// transcribe`. A checkpoint folder is self-contained (training_checkpoint.h):
// its config.yaml rebuilds the features and the model, its tokenizer and CMVN
// copies turn audio into features and tokens back into text, and
// model.safetensors holds the weights.
//
// Ranks split the utterances (evaluation_batches), decode their share, and
// world rank 0 gathers every hypothesis in manifest order (one
// broadcast_bytes per rank) while the totals are summed over ranks.
#pragma once

#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "io/manifest.h"
#include "io/tokenizer.h"
#include "model/parameters.h"
#include "model/presets.h"
#include "mpi/context.h"
#include "src/config.h"
#include "src/evaluation.h"
#include "src/test_time_adaptation.h"
#include "src/training_checkpoint.h"

namespace mpiasr {

struct CheckpointModel {
  CheckpointLocation location;
  Config config;  // the checkpoint's config.yaml
  std::unique_ptr<Tokenizer> tokenizer;
  std::string cmvn_path;  // the checkpoint's copy; "" without global CMVN
  ConformerConfig model_config;
  NamedTensors weights;
};

// Loads the checkpoint `path` names (see locate_checkpoint), verifying every
// file's checksum and that its CMVN statistics are plausible (io/cmvn.h).
// Throws Error(kCheckpoint) naming the file at fault, Error(kNonFinite) for
// weights that are not finite.
// What is wrong with a checkpoint passed over (a garbled pointer, a folder
// not intact) goes to `warnings`, the checkpoint loaded to `log`.
CheckpointModel load_checkpoint_model(const std::string& path, std::ostream& log,
                                      std::ostream& warnings);

struct Recognition {
  EvaluationTotals totals;             // summed over ranks
  std::vector<Hypothesis> hypotheses;  // world rank 0: every utterance, in manifest order
  double seconds = 0;                  // wall time of the decoding
};

// Decodes every utterance of `manifest` (collective), greedily or with
// `beam_search` when not null; `outputs`, when set, sees every batch's
// log-probs. With adaptation.steps > 0 every utterance is adapted to
// (src/test_time_adaptation.h) and decoded alone. Progress lines go to `log`
// on world rank 0 every few seconds.
Recognition recognize(const CheckpointModel& checkpoint, const Manifest& manifest,
                      const mpi::Context& ctx, int threads, std::ostream& log,
                      const CtcBeamSearch* beam_search = nullptr, const BatchOutputs& outputs = {},
                      const AdaptationOptions& adaptation = {});

}  // namespace mpiasr
