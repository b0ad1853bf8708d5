// The Conformer a config describes; see model_config.h.
#include "src/model_config.h"

#include <algorithm>
#include <nlohmann/json.hpp>
#include <sstream>

namespace mpiasr {

ConformerConfig conformer_config(const Config& config, int vocab_size) {
  const ModelConfig& m = config.model;
  ConformerConfig model = conformer_preset(std::string(to_string(m.preset)));
  if (m.d_model) model.d_model = *m.d_model;
  if (m.n_layers) model.n_layers = *m.n_layers;
  if (m.n_heads) model.n_heads = *m.n_heads;
  if (m.ff_mult) model.ff_mult = *m.ff_mult;
  if (m.conv_kernel) model.conv_kernel = *m.conv_kernel;
  if (m.subsampling_channels) model.subsampling_channels = *m.subsampling_channels;
  if (m.dropout) model.dropout = float(*m.dropout);
  model.n_mels = config.features.n_mels;
  model.vocab_size = vocab_size;
  validate_config(model);
  return model;
}

AdamWConfig adamw_config(const Config& config) {
  AdamWConfig adamw;
  adamw.beta1 = float(config.optimizer.beta1);
  adamw.beta2 = float(config.optimizer.beta2);
  adamw.eps = float(config.optimizer.eps);
  adamw.weight_decay = float(config.optimizer.weight_decay);
  adamw.clip_norm = config.optimizer.clip_norm;
  return adamw;
}

LossScalerConfig loss_scaler_config(const Config& config) {
  LossScalerConfig scaler;
  scaler.enabled = config.precision.mode == Precision::kFp16Mixed;
  scaler.init_scale = float(config.precision.init_scale);
  scaler.growth_interval = config.precision.growth_interval;
  scaler.max_skips_at_min_scale = config.precision.max_skips_at_min_scale;
  return scaler;
}

LrScheduleConfig lr_schedule_config(const Config& config, int64_t total_steps, int d_model,
                                    int world_size) {
  LrScheduleConfig schedule;
  const ScheduleConfig& s = config.schedule;
  schedule.warmup_steps = int(s.warmup_steps);
  schedule.total_steps = int(std::max<int64_t>(total_steps, s.warmup_steps + 1));
  schedule.d_model = d_model;
  schedule.global_batch = world_size * config.training.accumulation;
  schedule.reference_batch = s.reference_batch;
  schedule.scaling = s.lr_scaling;
  switch (s.type) {
    case ScheduleType::kNoam:
      schedule.kind = LrScheduleKind::kNoam;
      schedule.lr = s.noam_factor;
      break;
    case ScheduleType::kCosine:
      schedule.kind = LrScheduleKind::kWarmupCosine;
      schedule.lr = config.optimizer.lr;
      schedule.min_lr = s.min_lr;
      break;
    case ScheduleType::kConstant:  // warmup, then a cosine from lr to lr
      schedule.kind = LrScheduleKind::kWarmupCosine;
      schedule.lr = schedule.min_lr = config.optimizer.lr;
      break;
  }
  return schedule;
}

std::string describe_model(const Config& config, const ConformerConfig& model) {
  std::ostringstream out;
  out << "conformer " << to_string(config.model.preset) << ": d_model " << model.d_model << ", "
      << model.n_layers << " layers, " << model.n_heads << " heads, ff x" << model.ff_mult
      << ", conv kernel " << model.conv_kernel << ", dropout " << model.dropout << ", vocab "
      << model.vocab_size;
  return out.str();
}

std::string conformer_json(const ConformerConfig& model) {
  const nlohmann::json json = {{"n_mels", model.n_mels},
                               {"d_model", model.d_model},
                               {"n_layers", model.n_layers},
                               {"n_heads", model.n_heads},
                               {"ff_mult", model.ff_mult},
                               {"conv_kernel", model.conv_kernel},
                               {"subsampling_channels", model.subsampling_channels},
                               {"vocab_size", model.vocab_size},
                               {"layernorm_eps", model.layernorm_eps}};
  return json.dump();
}

}  // namespace mpiasr
