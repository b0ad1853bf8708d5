// Checkpoint averaging: the model whose every weight is the mean of that
// weight over K checkpoints of one run,
//   w = (1/K) sum_k w_k        (summed in double, rounded once to float),
// which smooths the noise of the last steps of SGD (Polyak averaging over
// checkpoints, as ESPnet and fairseq average the last or best epochs).
//
// The result is a checkpoint like the newest of the K (its step, config.yaml,
// tokenizer, CMVN, optimizer moments and state.json), with model.safetensors
// replaced by the mean and state.json gaining "averaged_steps": [the K steps,
// ascending]. The K must hold the same tensors (names and shapes), the same
// architecture (the "conformer" metadata) and the same tokenizer and CMVN
// files; a mismatch is an error naming the two checkpoints and what differs.
#pragma once

#include <vector>

#include "io/checkpoint.h"
#include "src/training_checkpoint.h"

namespace mpiasr {

// At least two distinct steps. Errors have ExitCode::kCheckpoint.
CheckpointFiles average_checkpoints(const std::vector<CheckpointLocation>& checkpoints);

}  // namespace mpiasr
