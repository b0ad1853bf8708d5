// The contents of a training checkpoint (DESIGN.md "Checkpoint format"),
// written and verified by io/checkpoint.h:
//
//   model.safetensors      fp32 master weights, PyTorch-style names and shapes
//                          ("encoder.layers.0.ff1.linear1.weight"), metadata {"format": "pt"}
//   optimizer.safetensors  AdamW moments by name: adam_m.<name>, adam_v.<name>
//   state.json             TrainingState below, plus the file checksums
//   config.yaml            the resolved config of the run
//   tokens.txt | tokenizer.model, cmvn.json (global CMVN only)
//                          copies of the data files, so eval and transcribe
//                          need nothing but the checkpoint folder
//
// Every random draw of training derives from (seed, epoch, step, utterance),
// so (step, epoch, position in epoch) and the seed are the whole random
// state: a resumed run repeats the run that never stopped, bit for bit.
#pragma once

#include <cstdint>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "io/checkpoint.h"
#include "model/parameters.h"
#include "model/presets.h"
#include "src/config.h"

namespace mpiasr {

inline constexpr const char* kModelFile = "model.safetensors";
inline constexpr const char* kOptimizerFile = "optimizer.safetensors";
inline constexpr const char* kConfigFile = "config.yaml";
inline constexpr const char* kCmvnFile = "cmvn.json";

// "tokens.txt" (char) or "tokenizer.model" (sentencepiece).
std::string tokenizer_file_name(const TokenizerConfig& tokenizer);

struct TrainingState {
  int64_t step = 0;            // training steps taken
  int64_t optimizer_step = 0;  // steps AdamW applied (fewer when fp16 steps were skipped)
  int epoch = 0;               // the epoch in progress (from 0)
  int64_t batch_in_epoch = 0;  // this rank's next batch of the epoch
  int64_t batches_in_epoch = 0;
  uint64_t seed = 0;
  nlohmann::json scaler = nlohmann::json::object();  // LossScaler::state()
  int64_t total_steps = 0;                           // the schedule's length
  double lr = 0;                                     // the last step's learning rate
  double train_seconds = 0;  // wall time trained so far, over every run that led here
  double best_cer = std::numeric_limits<double>::infinity();
  int64_t best_step = 0;  // 0: no validation yet
  int world_size = 1;
  int accumulation = 1;
  int threads = 0;  // CPU threads per rank (bit-exact resume needs the same)
  std::string config_hash, train_manifest_hash, valid_manifest_hash;
  std::string tokenizer_file, cmvn_file;  // "" when there is no CMVN file

  nlohmann::json to_json() const;
  // Throws Error(kCheckpoint) naming `source` and the missing or bad field.
  static TrainingState from_json(const nlohmann::json& state, const std::string& source);
};

// The bytes of a safetensors file holding `tensors` (float32) with metadata
// {"format": "pt"} and `metadata`.
std::string tensors_to_safetensors(const NamedTensors& tensors,
                                   const std::map<std::string, std::string>& metadata = {});
// Every tensor of a safetensors file (float32 only); `source` names it in errors.
NamedTensors tensors_from_safetensors(const std::string& bytes, const std::string& source);

// The files of a checkpoint; cmvn_path "" when there is no global CMVN.
// model.safetensors also carries the architecture as the metadata
// "conformer" (conformer_json), so the weights describe their model.
CheckpointFiles make_checkpoint_files(const NamedTensors& model, const NamedTensors& optimizer,
                                      const TrainingState& state, const std::string& config_yaml,
                                      const std::string& tokenizer_path,
                                      const std::string& cmvn_path,
                                      const ConformerConfig& architecture);

// The checkpoint folder a user names: a step folder (holding state.json), a
// checkpoint root (its `best` pointer, else `latest`, else the newest intact
// step), or an output folder holding checkpoints/. Corrupt checkpoints are
// reported to `log` and skipped. Throws Error(kCheckpoint) when there is none.
struct CheckpointLocation {
  std::string root;
  int64_t step = 0;
  std::string dir;  // root/step-NNNNNNNN
};
CheckpointLocation locate_checkpoint(const std::string& path, const CheckpointLog& log);

}  // namespace mpiasr
