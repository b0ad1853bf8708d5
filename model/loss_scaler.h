// Dynamic loss scaling for fp16 training, with PyTorch GradScaler's semantics.
//
// The loss is multiplied by scale() before the backward pass so small fp16
// gradients do not flush to zero; the optimizer unscales (grad_scale = 1 /
// scale()). After every step the caller reports whether any gradient was NaN
// or inf (checked after the all-reduce, so all ranks agree):
//   non-finite: skip the step, scale *= backoff_factor (never below min_scale),
//               restart the count of finite steps
//   finite:     apply the step; after growth_interval finite steps in a row,
//               scale *= growth_factor (kept when that would overflow float)
// Defaults: start 2^16, growth 2 every 2000 steps, backoff 0.5. min_scale
// (default 1) is this trainer's addition: GradScaler has no floor, and a
// scale below 1 would only make fp16 underflow worse. So is stuck(): after
// max_skips_at_min_scale steps in a row skipped at the minimum scale (where
// backing off can no longer help), the gradients overflow at any scale and
// the trainer stops the run as diverged instead of skipping forever.
// Disabled (fp32 training): scale() is 1 and update() always applies the step;
// a non-finite fp32 gradient is divergence, for the trainer to report.
// The rule itself is loss_scaler_update (kernels/step_control.h), which the
// training step runs where the backend computes; this class holds the
// configuration, checks it, and carries the state to and from checkpoints.
#pragma once

#include <nlohmann/json.hpp>

#include "kernels/step_control.h"

namespace mpiasr {

struct LossScalerConfig {
  bool enabled = true;
  float init_scale = 65536.0f;
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  int growth_interval = 2000;
  float min_scale = 1.0f;
  int max_skips_at_min_scale = 20;
};

class LossScaler {
 public:
  explicit LossScaler(const LossScalerConfig& config = {});

  float scale() const { return state_.scale; }
  bool enabled() const { return config_.enabled; }
  // Finite steps since the last change of scale.
  int growth_tracker() const { return state_.growth_tracker; }
  // Steps in a row skipped at the minimum scale, and whether there were
  // max_skips_at_min_scale of them.
  int skips_at_min_scale() const { return state_.skips_at_min_scale; }
  bool stuck() const { return state_.skips_at_min_scale >= config_.max_skips_at_min_scale; }
  const LossScalerConfig& config() const { return config_; }
  // The rule and the state as the step decision takes them.
  LossScalerRule rule() const;
  const LossScalerState& loss_scaler_state() const { return state_; }
  void set_loss_scaler_state(const LossScalerState& state) { state_ = state; }

  // Records one step's outcome; returns whether to apply the step.
  bool update(bool found_nonfinite);

  // {"enabled", "scale", "growth_tracker", "skips_at_min_scale"} for the
  // checkpoint's state.json.
  nlohmann::json state() const;
  // Restores what state() saved (a state without skips_at_min_scale, from
  // before it was kept, counts 0); the factors come from this scaler's
  // config. A disabled scaler ignores the state; an enabled one given a
  // disabled run's state keeps its initial scale. Bad values throw.
  void load_state(const nlohmann::json& state);

 private:
  LossScalerConfig config_;
  LossScalerState state_;
};

}  // namespace mpiasr
