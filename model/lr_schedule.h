// Learning-rate schedules, as a function of the optimizer step (counted from 1:
// the step being taken, the t of AdamW's bias correction), times the rule that
// scales the LR with the global batch.
//
//   constant      lr(t) = lr
//   noam          lr(t) = lr * d_model^-0.5 * min(t^-0.5, t * warmup^-1.5)
//                 (lr is the "factor"; the peak, at t = warmup, is lr * (d_model * warmup)^-0.5)
//   warmup_cosine lr(t) = lr * t / warmup                                   for t <= warmup
//                 lr(t) = min_lr + (lr - min_lr) * (1 + cos(pi * p)) / 2,
//                         p = min(1, (t - warmup) / (total_steps - warmup))  after
//
// Batch scaling multiplies the whole schedule (min_lr included) by
//   none 1,  linear global_batch / reference_batch,  sqrt sqrt(global_batch / reference_batch)
// where global_batch = batch per rank x world size x accumulation steps and
// reference_batch is the batch the base LR was tuned for.
#pragma once

namespace mpiasr {

enum class LrScheduleKind { kConstant, kNoam, kWarmupCosine };
enum class LrScaling { kNone, kLinear, kSqrt };

// The factor on the LR for a global batch; reference_batch and global_batch > 0
// unless the rule is none.
double lr_batch_scale(LrScaling rule, int global_batch, int reference_batch);

struct LrScheduleConfig {
  LrScheduleKind kind = LrScheduleKind::kNoam;
  double lr = 1.0;       // base LR (constant, warmup_cosine) or factor (noam)
  int warmup_steps = 0;  // noam: >= 1; warmup_cosine: >= 0 (0: no warmup)
  int total_steps = 0;   // warmup_cosine: > warmup_steps
  double min_lr = 0.0;   // warmup_cosine: in [0, lr]
  int d_model = 256;     // noam
  LrScaling scaling = LrScaling::kNone;
  int global_batch = 0;
  int reference_batch = 0;
};

class LrSchedule {
 public:
  // Checks the config; a bad field throws an Error naming it and its value.
  explicit LrSchedule(const LrScheduleConfig& config);

  // The LR of optimizer step `step` (>= 1), batch scaling included.
  double lr_at(int step) const;
  // The batch scaling factor in effect.
  double batch_scale() const { return batch_scale_; }

 private:
  LrScheduleConfig config_;
  double batch_scale_;
};

}  // namespace mpiasr
