// The step decision (kernels/step_control.h) against the trainer's host
// arithmetic written out here: the unscaled norm, torch's clip coefficient,
// AdamW's grad scale and bias corrections of the step count; GradScaler's
// rule (skip and halve on a non-finite norm, never below min_scale; double
// after growth_interval finite steps, unless that overflows); with the scaler
// disabled a non-finite norm is skipped and recorded as divergence; the sums
// for the progress line accumulate and the gradient sum is consumed.
#include "kernels/step_control.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace mpiasr {
namespace {

TEST(StepControl, AppliedStepUnscalesClipsAndCountsLikeTheHostFormula) {
  StepRule rule;
  rule.scaler.enabled = 1;
  rule.clip_norm = 5.0;
  StepControl c;
  c.scaler.scale = 1024.0f;
  c.loss_divisor = 37.0;
  c.lr = 0.01f;
  for (int step = 1; step <= 3; ++step) {
    const double sum_squares = 1e9 * step;  // norm sqrt(1e9 step) / (1024 * 37) ~ 0.83 sqrt(step)
    c.grad_sum_squares = sum_squares;
    decide_step(c, rule);
    const float unscale = float(1.0 / (1024.0 * 37.0));
    const double norm = std::sqrt(sum_squares) * double(unscale);
    EXPECT_EQ(c.apply, 1);
    EXPECT_EQ(c.grad_norm, norm);
    EXPECT_EQ(c.grad_scale, float(double(unscale) * std::min(1.0, 5.0 / (norm + 1e-6))));
    EXPECT_EQ(c.optimizer_step, step);
    EXPECT_EQ(c.bias_correction1, 1.0 - std::pow(double(0.9f), step));
    EXPECT_EQ(c.bias_correction2, 1.0 - std::pow(double(0.98f), step));
    EXPECT_EQ(c.grad_sum_squares, 0.0) << "consumed";
    EXPECT_EQ(c.scaler.growth_tracker, step);
  }
  EXPECT_EQ(c.steps, 3);
  EXPECT_EQ(c.skipped, 0);

  // A norm above clip_norm is scaled down to it.
  c.grad_sum_squares = std::pow(1024.0 * 37.0 * 50.0, 2);
  decide_step(c, rule);
  const double clip = double(c.grad_scale) * 1024.0 * 37.0;
  EXPECT_NEAR(clip * c.grad_norm, 5.0, 1e-5);

  const AdamWCoefficients<float> k = adamw_coefficients<float>(c, {0.5f, 0.75f, 1e-8f}, 0.125f);
  EXPECT_EQ(k.lr, 0.01f);
  EXPECT_EQ(k.beta1, 0.5f);
  EXPECT_EQ(k.beta2, 0.75f);
  EXPECT_EQ(k.eps, 1e-8f);
  EXPECT_EQ(k.weight_decay, 0.125f);
  EXPECT_EQ(k.grad_scale, c.grad_scale);
  EXPECT_EQ(k.bias_correction1, float(c.bias_correction1));
}

TEST(StepControl, NonFiniteGradientSkipsAndBacksOffTheScale) {
  StepRule rule;
  rule.scaler = {.enabled = 1,
                 .growth_factor = 2.0f,
                 .backoff_factor = 0.5f,
                 .min_scale = 2.0f,
                 .growth_interval = 3};
  StepControl c;
  c.scaler.scale = 8.0f;
  for (int i = 0; i < 2; ++i) {
    c.grad_sum_squares = 1.0;
    decide_step(c, rule);
  }
  EXPECT_EQ(c.scaler.growth_tracker, 2);
  const float grad_scale = c.grad_scale;
  c.grad_sum_squares = std::numeric_limits<double>::infinity();
  decide_step(c, rule);
  EXPECT_EQ(c.apply, 0);
  EXPECT_EQ(c.scaler.scale, 4.0f);
  EXPECT_EQ(c.scaler.growth_tracker, 0);
  EXPECT_EQ(c.optimizer_step, 2);
  EXPECT_EQ(c.grad_scale, grad_scale) << "untouched: AdamW does nothing";
  EXPECT_EQ(c.skipped, 1);
  EXPECT_EQ(c.diverged, 0) << "with the scaler on, a skip is not divergence";
  c.grad_sum_squares = std::nan("");
  decide_step(c, rule);
  c.grad_sum_squares = std::nan("");
  decide_step(c, rule);
  EXPECT_EQ(c.scaler.scale, 2.0f) << "min_scale is the floor";
  // growth_interval finite steps double it.
  for (int i = 0; i < 3; ++i) {
    c.grad_sum_squares = 1.0;
    decide_step(c, rule);
  }
  EXPECT_EQ(c.scaler.scale, 4.0f);
  EXPECT_EQ(c.scaler.growth_tracker, 0);
  EXPECT_EQ(c.steps, 8);
  EXPECT_EQ(c.skipped, 3);
  // Growth that would overflow keeps the scale.
  LossScalerState huge{std::numeric_limits<float>::max(), 2};
  EXPECT_TRUE(loss_scaler_update(huge, false, rule.scaler));
  EXPECT_EQ(huge.scale, std::numeric_limits<float>::max());
  EXPECT_EQ(huge.growth_tracker, 0);
}

TEST(StepControl, WithoutTheScalerANonFiniteNormIsDivergence) {
  StepRule rule;  // scaler disabled (fp32)
  StepControl c;
  c.grad_sum_squares = 4.0;
  decide_step(c, rule);
  EXPECT_EQ(c.apply, 1);
  EXPECT_EQ(c.grad_norm, 2.0);
  EXPECT_EQ(c.grad_scale, 1.0f) << "no clipping with clip_norm 0";
  c.grad_sum_squares = std::numeric_limits<double>::infinity();
  decide_step(c, rule);
  c.grad_sum_squares = std::nan("");
  decide_step(c, rule);
  EXPECT_EQ(c.apply, 0);
  EXPECT_EQ(c.scaler.scale, 1.0f);
  EXPECT_EQ(c.optimizer_step, 1);
  EXPECT_EQ(c.diverged, 2);
  EXPECT_EQ(c.first_diverged, 2);
  EXPECT_EQ(c.diverged_norm, std::numeric_limits<double>::infinity());
  EXPECT_EQ(c.grad_norm_sum, 2.0) << "only applied steps";
}

}  // namespace
}  // namespace mpiasr
