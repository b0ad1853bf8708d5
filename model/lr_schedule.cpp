// Learning-rate schedules (constant, Noam, warmup + cosine) and batch scaling.
#include "model/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "src/base/error.h"

namespace mpiasr {

double lr_batch_scale(LrScaling rule, int global_batch, int reference_batch) {
  if (rule == LrScaling::kNone) return 1.0;
  if (global_batch <= 0 || reference_batch <= 0)
    MPIASR_FAIL(ExitCode::kUsage, "LR scaling: global batch "
                                      << global_batch << " and reference batch " << reference_batch
                                      << " must be > 0");
  const double ratio = static_cast<double>(global_batch) / reference_batch;
  return rule == LrScaling::kLinear ? ratio : std::sqrt(ratio);
}

LrSchedule::LrSchedule(const LrScheduleConfig& config)
    : config_(config),
      batch_scale_(lr_batch_scale(config.scaling, config.global_batch, config.reference_batch)) {
  if (!(config.lr >= 0.0 && std::isfinite(config.lr)))
    MPIASR_FAIL(ExitCode::kUsage, "LR schedule: lr " << config.lr << " must be finite and >= 0");
  switch (config.kind) {
    case LrScheduleKind::kConstant:
      break;
    case LrScheduleKind::kNoam:
      if (config.warmup_steps < 1)
        MPIASR_FAIL(ExitCode::kUsage,
                    "LR schedule noam: warmup_steps " << config.warmup_steps << " must be >= 1");
      if (config.d_model < 1)
        MPIASR_FAIL(ExitCode::kUsage,
                    "LR schedule noam: d_model " << config.d_model << " must be >= 1");
      break;
    case LrScheduleKind::kWarmupCosine:
      if (config.warmup_steps < 0)
        MPIASR_FAIL(ExitCode::kUsage, "LR schedule warmup_cosine: warmup_steps "
                                          << config.warmup_steps << " must be >= 0");
      if (config.total_steps <= config.warmup_steps)
        MPIASR_FAIL(ExitCode::kUsage, "LR schedule warmup_cosine: total_steps "
                                          << config.total_steps << " must exceed warmup_steps "
                                          << config.warmup_steps);
      if (!(config.min_lr >= 0.0 && config.min_lr <= config.lr))
        MPIASR_FAIL(ExitCode::kUsage, "LR schedule warmup_cosine: min_lr "
                                          << config.min_lr << " must be in [0, lr = " << config.lr
                                          << "]");
      break;
  }
}

double LrSchedule::lr_at(int step) const {
  MPIASR_CHECK(step >= 1, "LR schedule: step " << step << " (steps count from 1)");
  const double t = step;
  double lr = config_.lr;
  switch (config_.kind) {
    case LrScheduleKind::kConstant:
      break;
    case LrScheduleKind::kNoam: {
      const double warmup = config_.warmup_steps;
      lr *= std::min(1.0 / std::sqrt(t), t / (warmup * std::sqrt(warmup))) /
            std::sqrt(static_cast<double>(config_.d_model));
      break;
    }
    case LrScheduleKind::kWarmupCosine: {
      const int warmup = config_.warmup_steps;
      if (step <= warmup) {
        lr *= t / warmup;
      } else {
        const double progress =
            std::min(1.0, (t - warmup) / static_cast<double>(config_.total_steps - warmup));
        lr = config_.min_lr +
             (config_.lr - config_.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
      }
      break;
    }
  }
  return lr * batch_scale_;
}

}  // namespace mpiasr
