// Dynamic loss scaling (GradScaler semantics) and its checkpoint state.
#include "model/loss_scaler.h"

#include <algorithm>
#include <cmath>

#include "src/base/error.h"

namespace mpiasr {

LossScaler::LossScaler(const LossScalerConfig& config)
    : config_(config), state_{config.enabled ? config.init_scale : 1.0f, 0, 0} {
  if (!config.enabled) return;
  if (!(std::isfinite(config.init_scale) && config.init_scale >= config.min_scale))
    MPIASR_FAIL(ExitCode::kUsage, "loss scaler: init_scale " << config.init_scale
                                                             << " must be finite and >= min_scale "
                                                             << config.min_scale);
  if (!(config.min_scale > 0.0f))
    MPIASR_FAIL(ExitCode::kUsage, "loss scaler: min_scale " << config.min_scale << " must be > 0");
  if (!(config.growth_factor > 1.0f))
    MPIASR_FAIL(ExitCode::kUsage,
                "loss scaler: growth_factor " << config.growth_factor << " must be > 1");
  if (!(config.backoff_factor > 0.0f && config.backoff_factor < 1.0f))
    MPIASR_FAIL(ExitCode::kUsage,
                "loss scaler: backoff_factor " << config.backoff_factor << " must be in (0, 1)");
  if (config.growth_interval < 1)
    MPIASR_FAIL(ExitCode::kUsage,
                "loss scaler: growth_interval " << config.growth_interval << " must be >= 1");
  if (config.max_skips_at_min_scale < 1)
    MPIASR_FAIL(ExitCode::kUsage, "loss scaler: max_skips_at_min_scale "
                                      << config.max_skips_at_min_scale << " must be >= 1");
}

LossScalerRule LossScaler::rule() const {
  return {config_.enabled ? 1 : 0, config_.growth_factor,   config_.backoff_factor,
          config_.min_scale,       config_.growth_interval, config_.max_skips_at_min_scale};
}

bool LossScaler::update(bool found_nonfinite) {
  return loss_scaler_update(state_, found_nonfinite, rule());
}

nlohmann::json LossScaler::state() const {
  return {{"enabled", config_.enabled},
          {"scale", state_.scale},
          {"growth_tracker", state_.growth_tracker},
          {"skips_at_min_scale", state_.skips_at_min_scale}};
}

void LossScaler::load_state(const nlohmann::json& state) {
  if (!config_.enabled) return;
  for (const char* key : {"enabled", "scale", "growth_tracker"})
    if (!state.contains(key))
      MPIASR_FAIL(ExitCode::kCheckpoint,
                  "loss scaler state: no \"" << key << "\" in " << state.dump());
  if (!state["enabled"].is_boolean() || !state["scale"].is_number() ||
      !state["growth_tracker"].is_number_integer() ||
      (state.contains("skips_at_min_scale") && !state["skips_at_min_scale"].is_number_integer()))
    MPIASR_FAIL(ExitCode::kCheckpoint, "loss scaler state: wrong types in " << state.dump());
  if (!state["enabled"].get<bool>()) return;
  const float scale = state["scale"].get<float>();
  const int tracker = state["growth_tracker"].get<int>();
  if (!(std::isfinite(scale) && scale > 0.0f))
    MPIASR_FAIL(ExitCode::kCheckpoint,
                "loss scaler state: scale " << scale << " in " << state.dump());
  if (tracker < 0 || tracker >= config_.growth_interval)
    MPIASR_FAIL(ExitCode::kCheckpoint, "loss scaler state: growth_tracker "
                                           << tracker << " outside [0, " << config_.growth_interval
                                           << ") in " << state.dump());
  const int skips = state.value("skips_at_min_scale", 0);
  if (skips < 0 || skips >= config_.max_skips_at_min_scale)
    MPIASR_FAIL(ExitCode::kCheckpoint, "loss scaler state: skips_at_min_scale "
                                           << skips << " outside [0, "
                                           << config_.max_skips_at_min_scale << ") in "
                                           << state.dump());
  state_ = {scale, tracker, skips};
}

}  // namespace mpiasr
