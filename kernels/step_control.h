// The decisions that follow the gradient all-reduce in a training step, made
// where the backend computes (a one-thread kernel on CUDA, plain code on the
// CPU), so that a GPU step never waits for the host or the host for the GPU
// (DESIGN.md "A step without host synchronization"). One StepControl lives in
// backend memory for the whole run:
//
//   host, before the step   loss_divisor (the global target-token count), lr
//   during the step         loss_sum += CTC losses (ctc_loss), grad_sum_squares
//                           += sum of g^2 over this rank's gradient (all-reduced
//                           over ranks first when the optimizer is sharded)
//   decide_step             unscale  = 1 / (loss_scale * loss_divisor)
//                           norm     = sqrt(grad_sum_squares) * unscale
//                           apply    = loss_scaler_update(!finite(norm))
//                                      (GradScaler: skip and back off on a
//                                      non-finite norm, grow after
//                                      growth_interval finite steps; with the
//                                      scaler disabled a non-finite norm is
//                                      divergence: the step is skipped and
//                                      counted in `diverged` for the host;
//                                      max_skips_at_min_scale skips in a row
//                                      at the minimum scale mark the scaler
//                                      stuck, also for the host to stop on)
//                           clip     = min(1, clip_norm / (norm + 1e-6)) (1 when
//                                      clip_norm is 0; torch's clip_grad_norm_)
//                           applied: optimizer_step += 1, grad_scale = unscale
//                           * clip, the bias corrections 1 - beta^t of the new t
//   adamw (adamw_math.h)    reads lr, grad_scale, the bias corrections; does
//                           nothing when the step is skipped
//   host, when it logs      reads the control back (the one wait), then
//                           clears the sums (the fields from loss_sum on)
//
// The arithmetic is the trainer's host code of before, operation for
// operation in the same precision, so the CPU backend's results are unchanged.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "kernels/adamw_math.h"
#include "kernels/hd.h"

namespace mpiasr {

// Dynamic loss scaling (model/loss_scaler.h), in the terms the device needs.
struct LossScalerRule {
  int32_t enabled = 0;
  float growth_factor = 2.0f;
  float backoff_factor = 0.5f;
  float min_scale = 1.0f;
  int32_t growth_interval = 2000;
  int32_t max_skips_at_min_scale = 20;  // that many in a row: stuck (decide_step)
};

struct LossScalerState {
  float scale = 1.0f;
  int32_t growth_tracker = 0;      // finite steps since the scale last changed
  int32_t skips_at_min_scale = 0;  // steps in a row skipped at min_scale (stuck when many)
};

// GradScaler's update after one step; returns whether to apply the step.
MPIASR_HD bool loss_scaler_update(LossScalerState& state, bool found_nonfinite,
                                  const LossScalerRule& rule) {
  if (!rule.enabled) return true;
  if (found_nonfinite) {
    state.skips_at_min_scale = state.scale <= rule.min_scale ? state.skips_at_min_scale + 1 : 0;
    const float backed_off = state.scale * rule.backoff_factor;
    state.scale = backed_off > rule.min_scale ? backed_off : rule.min_scale;
    state.growth_tracker = 0;
    return false;
  }
  state.skips_at_min_scale = 0;
  if (++state.growth_tracker == rule.growth_interval) {
    const float grown = state.scale * rule.growth_factor;
    if (std::isfinite(grown)) state.scale = grown;
    state.growth_tracker = 0;
  }
  return true;
}

// What decide_step needs besides the control: the scaler's rule, clipping and
// AdamW's betas (for the bias corrections).
struct StepRule {
  LossScalerRule scaler;
  double clip_norm = 0.0;  // 0: no clipping
  float beta1 = 0.9f;
  float beta2 = 0.98f;
};

struct StepControl {
  // Inputs of this step, written by the host.
  double loss_divisor = 1.0;
  float lr = 0.0f;
  // The loss-scaled gradient's sum of squares, zeroed by decide_step.
  double grad_sum_squares = 0.0;
  // State kept across steps (checkpointed).
  LossScalerState scaler;
  int32_t optimizer_step = 0;  // steps applied: AdamW's t
  // This step's decision.
  int32_t apply = 0;
  float grad_scale = 0.0f;  // on the gradient: unscale * clip
  double grad_norm = 0.0;   // unscaled, of the token-averaged loss
  double bias_correction1 = 1.0, bias_correction2 = 1.0;
  // Sums since the host last read them (cleared from here to the end).
  double loss_sum = 0.0;       // CTC losses of this rank's feasible utterances
  double grad_norm_sum = 0.0;  // over the applied steps
  int32_t steps = 0;           // decided
  int32_t skipped = 0;         // skipped for a non-finite gradient
  int32_t diverged = 0;        // of those, with the scaler disabled (fp32)
  int32_t first_diverged = 0;  // `steps` at the first of those (1-based)
  double diverged_norm = 0.0;  // its norm
  int32_t stuck_step = 0;      // `steps` when the scaler got stuck (0: not)
};

// The offset of the sums that the host clears after reading them.
constexpr size_t kStepControlSumsOffset = offsetof(StepControl, loss_sum);

MPIASR_HD void decide_step(StepControl& c, const StepRule& rule) {
  const float unscale = float(1.0 / (double(c.scaler.scale) * c.loss_divisor));
  const double norm = std::sqrt(c.grad_sum_squares) * double(unscale);
  c.grad_sum_squares = 0.0;
  const bool finite = std::isfinite(norm);
  ++c.steps;
  c.grad_norm = norm;
  c.apply = loss_scaler_update(c.scaler, !finite, rule.scaler) && finite;
  if (!c.apply) {
    ++c.skipped;
    if (rule.scaler.enabled && c.stuck_step == 0 &&
        c.scaler.skips_at_min_scale >= rule.scaler.max_skips_at_min_scale) {
      c.stuck_step = c.steps;
    }
    if (!rule.scaler.enabled && c.diverged++ == 0) {
      c.first_diverged = c.steps;
      c.diverged_norm = norm;
    }
    return;
  }
  double clip = 1.0;
  if (rule.clip_norm > 0) {
    const double ratio = rule.clip_norm / (norm + 1e-6);
    clip = ratio < 1.0 ? ratio : 1.0;
  }
  c.grad_scale = float(double(unscale) * clip);
  ++c.optimizer_step;
  c.bias_correction1 = 1.0 - std::pow(double(rule.beta1), c.optimizer_step);
  c.bias_correction2 = 1.0 - std::pow(double(rule.beta2), c.optimizer_step);
  c.grad_norm_sum += norm;
}

// AdamW's hyperparameters that do not change from step to step.
struct AdamWHyper {
  float beta1 = 0.9f;
  float beta2 = 0.98f;
  float eps = 1e-9f;
};

// One piece of AdamW's work (Backend::adamw_step): elements [offset, offset +
// count) of the weights, gradients and compute copy, whose moments are
// [state_offset, state_offset + count) of m and v, with its weight decay.
struct AdamWSegment {
  uint64_t offset = 0, count = 0, state_offset = 0;
  float weight_decay = 0.0f;
};

// The coefficients of the step `c` decided, for tensors with `weight_decay`.
template <typename R>
MPIASR_HD AdamWCoefficients<R> adamw_coefficients(const StepControl& c, const AdamWHyper& hyper,
                                                  float weight_decay) {
  return {R(c.lr),         R(hyper.beta1),  R(hyper.beta2),        R(hyper.eps),
          R(weight_decay), R(c.grad_scale), R(c.bias_correction1), R(c.bias_correction2)};
}

}  // namespace mpiasr
