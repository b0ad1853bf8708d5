// Dynamic loss scaling against GradScaler's rules: skip and halve on a
// non-finite gradient, double after 2000 finite steps in a row, state round
// trip; and this trainer's floor and stop: stuck after max_skips_at_min_scale
// skips in a row at the minimum scale.
#include "model/loss_scaler.h"

#include <gtest/gtest.h>

#include <cmath>

#include "src/base/error.h"

namespace mpiasr {
namespace {

TEST(LossScaler, StartsAt2To16) {
  LossScaler scaler;
  EXPECT_TRUE(scaler.enabled());
  EXPECT_EQ(scaler.scale(), 65536.0f);
  EXPECT_EQ(scaler.growth_tracker(), 0);
}

TEST(LossScaler, NonFiniteSkipsAndHalves) {
  LossScaler scaler;
  for (int i = 0; i < 1000; ++i) EXPECT_TRUE(scaler.update(false));
  EXPECT_FALSE(scaler.update(true));
  EXPECT_EQ(scaler.scale(), 32768.0f);
  EXPECT_EQ(scaler.growth_tracker(), 0);  // the finite streak starts over
  EXPECT_FALSE(scaler.update(true));
  EXPECT_EQ(scaler.scale(), 16384.0f);
}

TEST(LossScaler, DoublesAfter2000FiniteSteps) {
  LossScaler scaler;
  for (int i = 0; i < 1999; ++i) ASSERT_TRUE(scaler.update(false));
  EXPECT_EQ(scaler.scale(), 65536.0f);
  EXPECT_EQ(scaler.growth_tracker(), 1999);
  EXPECT_TRUE(scaler.update(false));
  EXPECT_EQ(scaler.scale(), 131072.0f);
  EXPECT_EQ(scaler.growth_tracker(), 0);
  // A skip in the middle of the next streak restarts the count.
  for (int i = 0; i < 1500; ++i) scaler.update(false);
  scaler.update(true);
  EXPECT_EQ(scaler.scale(), 65536.0f);
  for (int i = 0; i < 1999; ++i) scaler.update(false);
  EXPECT_EQ(scaler.scale(), 65536.0f);
  scaler.update(false);
  EXPECT_EQ(scaler.scale(), 131072.0f);
}

TEST(LossScaler, NeverBelowMinScale) {
  LossScaler scaler({.init_scale = 4.0f});
  const float expected[] = {2.0f, 1.0f, 1.0f, 1.0f};
  for (float scale : expected) {
    EXPECT_FALSE(scaler.update(true));
    EXPECT_EQ(scaler.scale(), scale);
  }
}

TEST(LossScaler, GrowthThatWouldOverflowKeepsTheScale) {
  const float top = std::ldexp(1.0f, 127);  // 2^128 is not a float
  LossScaler scaler({.init_scale = top, .growth_interval = 1});
  EXPECT_TRUE(scaler.update(false));
  EXPECT_EQ(scaler.scale(), top);
}

// Skips count toward stuck() only at the minimum scale, where backing off no
// longer changes anything; any applied step starts the count over.
TEST(LossScaler, StuckAfterMaxSkipsInARowAtTheMinimumScale) {
  LossScaler scaler({.init_scale = 4.0f, .max_skips_at_min_scale = 3});
  EXPECT_FALSE(scaler.update(true));  // at 4 -> 2
  EXPECT_FALSE(scaler.update(true));  // at 2 -> 1
  EXPECT_EQ(scaler.skips_at_min_scale(), 0);
  EXPECT_FALSE(scaler.update(true));  // at 1
  EXPECT_FALSE(scaler.update(true));
  EXPECT_EQ(scaler.skips_at_min_scale(), 2);
  EXPECT_FALSE(scaler.stuck());
  EXPECT_TRUE(scaler.update(false));  // applied: the count starts over
  EXPECT_EQ(scaler.skips_at_min_scale(), 0);
  for (int i = 0; i < 2; ++i) EXPECT_FALSE(scaler.update(true));
  EXPECT_FALSE(scaler.stuck());
  EXPECT_FALSE(scaler.update(true));
  EXPECT_EQ(scaler.skips_at_min_scale(), 3);
  EXPECT_TRUE(scaler.stuck());
  EXPECT_EQ(scaler.scale(), 1.0f);
}

TEST(LossScaler, DisabledIsOneAndNeverSkips) {
  LossScaler scaler({.enabled = false});
  EXPECT_EQ(scaler.scale(), 1.0f);
  for (int i = 0; i < 100; ++i) EXPECT_TRUE(scaler.update(true));
  EXPECT_FALSE(scaler.stuck());
  for (int i = 0; i < 3000; ++i) EXPECT_TRUE(scaler.update(false));
  EXPECT_EQ(scaler.scale(), 1.0f);
}

TEST(LossScaler, StateRoundTrip) {
  LossScaler scaler;
  for (int i = 0; i < 2000; ++i) scaler.update(false);
  scaler.update(true);
  for (int i = 0; i < 777; ++i) scaler.update(false);
  const std::string saved = scaler.state().dump();

  LossScaler resumed;
  resumed.load_state(nlohmann::json::parse(saved));
  EXPECT_EQ(resumed.scale(), 65536.0f);
  EXPECT_EQ(resumed.growth_tracker(), 777);
  for (int i = 0; i < 1223; ++i) {  // both grow on the same step
    scaler.update(false);
    resumed.update(false);
    ASSERT_EQ(resumed.scale(), scaler.scale()) << i;
  }
  EXPECT_EQ(resumed.scale(), 131072.0f);

  // The count of skips at the minimum scale survives too; a state written
  // before it was kept counts 0.
  LossScaler low({.init_scale = 1.0f, .max_skips_at_min_scale = 3});
  low.update(true);
  low.update(true);
  LossScaler low_resumed({.init_scale = 1.0f, .max_skips_at_min_scale = 3});
  low_resumed.load_state(low.state());
  EXPECT_EQ(low_resumed.skips_at_min_scale(), 2);
  EXPECT_FALSE(low_resumed.update(true));
  EXPECT_TRUE(low_resumed.stuck());
  low_resumed.load_state({{"enabled", true}, {"scale", 1.0}, {"growth_tracker", 0}});
  EXPECT_EQ(low_resumed.skips_at_min_scale(), 0);
}

TEST(LossScaler, DisabledStatesAreIgnored) {
  LossScaler enabled;
  enabled.load_state(LossScaler({.enabled = false}).state());
  EXPECT_EQ(enabled.scale(), 65536.0f);
  LossScaler disabled({.enabled = false});
  disabled.load_state({{"enabled", true}, {"scale", 8.0}, {"growth_tracker", 3}});
  EXPECT_EQ(disabled.scale(), 1.0f);
}

TEST(LossScaler, BadStateThrows) {
  auto code_of = [](const nlohmann::json& state) {
    try {
      LossScaler().load_state(state);
    } catch (const Error& e) {
      return e.code();
    }
    return ExitCode::kOk;
  };
  EXPECT_EQ(code_of({{"enabled", true}, {"scale", 8.0}}), ExitCode::kCheckpoint);
  EXPECT_EQ(code_of({{"enabled", true}, {"scale", -8.0}, {"growth_tracker", 0}}),
            ExitCode::kCheckpoint);
  EXPECT_EQ(code_of({{"enabled", true}, {"scale", 8.0}, {"growth_tracker", 2000}}),
            ExitCode::kCheckpoint);
  EXPECT_EQ(code_of({{"enabled", true}, {"scale", "big"}, {"growth_tracker", 0}}),
            ExitCode::kCheckpoint);
  EXPECT_EQ(
      code_of(
          {{"enabled", true}, {"scale", 8.0}, {"growth_tracker", 0}, {"skips_at_min_scale", -1}}),
      ExitCode::kCheckpoint);
  EXPECT_EQ(code_of({{"enabled", true},
                     {"scale", 8.0},
                     {"growth_tracker", 0},
                     {"skips_at_min_scale", "many"}}),
            ExitCode::kCheckpoint);
}

TEST(LossScaler, BadConfigThrows) {
  EXPECT_THROW(LossScaler({.backoff_factor = 1.5f}), Error);
  EXPECT_THROW(LossScaler({.growth_factor = 1.0f}), Error);
  EXPECT_THROW(LossScaler({.growth_interval = 0}), Error);
  EXPECT_THROW(LossScaler({.init_scale = 0.5f}), Error);
  EXPECT_THROW(LossScaler({.max_skips_at_min_scale = 0}), Error);
}

}  // namespace
}  // namespace mpiasr
