// LR schedules at known steps against their formulas, worked out by hand, and
// the batch scaling rules.
#include "model/lr_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

#include "src/base/error.h"

namespace mpiasr {
namespace {

TEST(LrSchedule, Constant) {
  LrSchedule schedule({.kind = LrScheduleKind::kConstant, .lr = 3e-4});
  EXPECT_EQ(schedule.lr_at(1), 3e-4);
  EXPECT_EQ(schedule.lr_at(123456), 3e-4);
}

TEST(LrSchedule, Noam) {
  // factor 5, d_model 144 (144^-0.5 = 1/12), warmup 1000 (1000^-1.5 = 1 / 31622.776...)
  LrSchedule schedule(
      {.kind = LrScheduleKind::kNoam, .lr = 5.0, .warmup_steps = 1000, .d_model = 144});
  const double c = 5.0 / 12.0;
  EXPECT_NEAR(schedule.lr_at(1), c * 1.0 / 31622.776601683792, 1e-18);  // rising: t w^-1.5
  EXPECT_NEAR(schedule.lr_at(250), c * 250.0 / 31622.776601683792, 1e-15);
  EXPECT_NEAR(schedule.lr_at(1000), c / 31.622776601683793, 1e-15);  // peak: w^-0.5
  EXPECT_NEAR(schedule.lr_at(4000), c / 63.245553203367585, 1e-15);  // falling: t^-0.5, half
  EXPECT_NEAR(schedule.lr_at(4000), schedule.lr_at(1000) / 2, 1e-15);
  EXPECT_LT(schedule.lr_at(999), schedule.lr_at(1000));
  EXPECT_LT(schedule.lr_at(1001), schedule.lr_at(1000));
}

TEST(LrSchedule, WarmupCosine) {
  // lr 1e-3 -> min 1e-5; warmup 100 steps, cosine over the next 1000.
  LrSchedule schedule({.kind = LrScheduleKind::kWarmupCosine,
                       .lr = 1e-3,
                       .warmup_steps = 100,
                       .total_steps = 1100,
                       .min_lr = 1e-5});
  EXPECT_NEAR(schedule.lr_at(1), 1e-5, 1e-18);   // 1e-3 * 1/100
  EXPECT_NEAR(schedule.lr_at(50), 5e-4, 1e-18);  // 1e-3 * 50/100
  EXPECT_NEAR(schedule.lr_at(100), 1e-3, 1e-18);
  // p = 250/1000 = 1/4: 1e-5 + 9.9e-4 * (1 + cos(pi/4)) / 2 = 1e-5 + 9.9e-4 * 0.853553390593
  EXPECT_NEAR(schedule.lr_at(350), 1e-5 + 9.9e-4 * 0.8535533905932737, 1e-15);
  EXPECT_NEAR(schedule.lr_at(600), (1e-3 + 1e-5) / 2, 1e-15);                   // p = 1/2
  EXPECT_NEAR(schedule.lr_at(850), 1e-5 + 9.9e-4 * 0.1464466094067262, 1e-15);  // p = 3/4
  EXPECT_NEAR(schedule.lr_at(1100), 1e-5, 1e-18);
  EXPECT_NEAR(schedule.lr_at(50000), 1e-5, 1e-18);  // stays at the floor
}

TEST(LrSchedule, CosineWithoutWarmup) {
  LrSchedule schedule(
      {.kind = LrScheduleKind::kWarmupCosine, .lr = 2.0, .warmup_steps = 0, .total_steps = 4});
  // p = t / 4: 2 * (1 + cos(pi t / 4)) / 2
  EXPECT_NEAR(schedule.lr_at(1), 1.0 + std::cos(std::numbers::pi / 4), 1e-15);
  EXPECT_NEAR(schedule.lr_at(2), 1.0, 1e-15);
  EXPECT_NEAR(schedule.lr_at(4), 0.0, 1e-15);
}

TEST(LrSchedule, BatchScalingRules) {
  EXPECT_EQ(lr_batch_scale(LrScaling::kNone, 0, 0), 1.0);
  EXPECT_EQ(lr_batch_scale(LrScaling::kLinear, 256, 64), 4.0);
  EXPECT_EQ(lr_batch_scale(LrScaling::kSqrt, 256, 64), 2.0);
  EXPECT_DOUBLE_EQ(lr_batch_scale(LrScaling::kSqrt, 32, 64), std::sqrt(0.5));
  EXPECT_THROW(lr_batch_scale(LrScaling::kLinear, 256, 0), Error);
}

TEST(LrSchedule, BatchScalingMultipliesTheSchedule) {
  LrScheduleConfig config{.kind = LrScheduleKind::kWarmupCosine,
                          .lr = 1e-3,
                          .warmup_steps = 10,
                          .total_steps = 100,
                          .min_lr = 1e-4};
  const LrSchedule base(config);
  config.scaling = LrScaling::kLinear;
  config.global_batch = 96;  // 3 ranks x batch 16 x 2 accumulation steps
  config.reference_batch = 32;
  const LrSchedule scaled(config);
  EXPECT_EQ(scaled.batch_scale(), 3.0);
  for (int step : {1, 5, 10, 40, 100, 500})
    EXPECT_DOUBLE_EQ(scaled.lr_at(step), 3.0 * base.lr_at(step));
}

TEST(LrSchedule, RejectsBadConfigsAndSteps) {
  EXPECT_THROW(LrSchedule({.kind = LrScheduleKind::kNoam, .warmup_steps = 0}), Error);
  EXPECT_THROW(LrSchedule({.kind = LrScheduleKind::kWarmupCosine,
                           .lr = 1e-3,
                           .warmup_steps = 100,
                           .total_steps = 100}),
               Error);
  EXPECT_THROW(LrSchedule({.kind = LrScheduleKind::kWarmupCosine,
                           .lr = 1e-3,
                           .warmup_steps = 1,
                           .total_steps = 100,
                           .min_lr = 1e-2}),
               Error);
  EXPECT_THROW(LrSchedule({.kind = LrScheduleKind::kConstant, .lr = 1e-3}).lr_at(0), Error);
}

}  // namespace
}  // namespace mpiasr
