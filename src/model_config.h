// The model and its training components as a config describes them: the
// Conformer (the preset of model.preset with every model.* key that is set
// replacing the preset's value, the input size from features.n_mels and the
// output size from the tokenizer), the AdamW optimizer (optimizer.*), the
// loss scaler (precision.*) and the learning-rate schedule (schedule.*).
#pragma once

#include <cstdint>
#include <string>

#include "model/loss_scaler.h"
#include "model/lr_schedule.h"
#include "model/optimizer.h"
#include "model/presets.h"
#include "src/config.h"

namespace mpiasr {

// vocab_size: the tokenizer's outputs, blank included. Throws Error(kUsage)
// naming the field when the result cannot build a model.
ConformerConfig conformer_config(const Config& config, int vocab_size);

// AdamW's hyperparameters and clipping from optimizer.* (the learning rate
// comes from the schedule).
AdamWConfig adamw_config(const Config& config);

// Dynamic loss scaling, on for precision.mode fp16-mixed.
LossScalerConfig loss_scaler_config(const Config& config);

// The schedule of schedule.type over total_steps (at least warmup + 1) for a
// model of width d_model, its LR scaled for the global batch of world_size
// ranks x training.accumulation micro-batches. constant is a warmup, then a
// cosine from optimizer.lr to itself.
LrScheduleConfig lr_schedule_config(const Config& config, int64_t total_steps, int d_model,
                                    int world_size);

// "conformer small: d_model 144, 6 layers, 4 heads, ff x4, conv kernel 31, vocab 29".
std::string describe_model(const Config& config, const ConformerConfig& model);

// The architecture as one line of JSON, every field but dropout, for the
// metadata of model.safetensors:
// {"n_mels":80,"d_model":144,"n_layers":6,"n_heads":4,"ff_mult":4,"conv_kernel":31,
//  "subsampling_channels":144,"vocab_size":29,"layernorm_eps":1e-05}
std::string conformer_json(const ConformerConfig& model);

}  // namespace mpiasr
