// The optimizer over a parameter store (fp64): weight decay reaches weights
// only, clipping scales the gradient by max_norm / (norm + 1e-6), the global
// norm matches a direct sum, and the state round-trips by name. (One AdamW
// step against hand arithmetic is the kernel's own test.)
#include "model/optimizer.h"

#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu/cpu_backend.h"
#include "model/linear.h"
#include "model/presets.h"

namespace mpiasr {
namespace {

class OptimizerTest : public ::testing::Test {
 protected:
  OptimizerTest() {
    // A LayerNorm's parameters, then a Linear, then a depthwise-conv-like weight.
    params_.add("norm.weight", {6}, ParameterKind::kNormWeight, 0);
    params_.add("norm.bias", {6}, ParameterKind::kNormBias, 0);
    Linear<double, double>(params_, "linear", 6, 5);
    params_.add("conv.weight", {5, 1, 3}, ParameterKind::kWeight, 3);
    params_.allocate(3);
  }

  // Sets every gradient element to a distinct value.
  void fill_grads() {
    for (const ParameterInfo& info : params_.infos()) {
      for (size_t i = 0; i < info.count; ++i) {
        params_.grad()[info.offset + i] = 0.01 * double(info.offset + i) - 0.3;
      }
    }
  }

  CpuBackend<double> backend_{1};
  ParameterStore<double, double> params_{backend_};
};

TEST_F(OptimizerTest, WeightDecaySkipsBiasesAndNorms) {
  AdamWConfig config;
  config.weight_decay = 0.1f;
  Optimizer<double, double> optimizer(params_, config);
  const NamedTensors before = params_.export_masters();
  // Zero gradients: the Adam update is 0, only the decay moves the weights.
  const float lr = 0.5f;
  optimizer.step(lr, 1.0f);
  EXPECT_EQ(optimizer.step_count(), 1);
  const NamedTensors after = params_.export_masters();
  for (const ParameterInfo& info : params_.infos()) {
    const bool decays = info.kind == ParameterKind::kWeight;
    for (size_t i = 0; i < info.count; ++i) {
      const double w = before.at(info.name).data[i];
      const double expected = decays ? w - double(lr) * double(config.weight_decay) * w : w;
      EXPECT_NEAR(after.at(info.name).data[i], expected, 1e-7) << info.name << "[" << i << "]";
    }
  }
  EXPECT_NE(after.at("linear.weight").data[0], before.at("linear.weight").data[0]);
  EXPECT_EQ(after.at("norm.weight").data[0], 1.0f);
  EXPECT_EQ(after.at("linear.bias").data[0], before.at("linear.bias").data[0]);
}

TEST_F(OptimizerTest, GlobalNormAndClipping) {
  Optimizer<double, double> optimizer(params_);
  fill_grads();
  double sum = 0.0;
  for (const ParameterInfo& info : params_.infos()) {
    for (size_t i = 0; i < info.count; ++i) sum += std::pow(params_.grad()[info.offset + i], 2);
  }
  const double norm = std::sqrt(sum);
  EXPECT_NEAR(optimizer.global_grad_norm(), norm, 1e-12 * norm);
  EXPECT_NEAR(optimizer.global_grad_norm(0.25f), 0.25 * norm, 1e-12 * norm);
  EXPECT_TRUE(optimizer.grads_finite());

  // With grad_scale 0.5 the unscaled norm is norm / 2; clip it to a quarter of that.
  const double unscaled = optimizer.global_grad_norm(0.5f);
  const double max_norm = unscaled / 4.0;
  optimizer.clip(max_norm, unscaled);
  optimizer.step(1e-3f, 0.5f);
  // First moment after one step: m = (1 - beta1) * g * grad_scale * clip.
  const double clip = max_norm / (unscaled + 1e-6);
  NamedTensors state = optimizer.export_state();
  for (const ParameterInfo& info : params_.infos()) {
    const HostTensor& m = state.at("adam_m." + info.name);
    const HostTensor& v = state.at("adam_v." + info.name);
    EXPECT_EQ(m.shape, info.shape);
    for (size_t i = 0; i < info.count; ++i) {
      const double g = params_.grad()[info.offset + i] * 0.5 * clip;
      EXPECT_NEAR(m.data[i], (1.0 - 0.9) * g, 1e-6 * std::abs(g) + 1e-12) << info.name;
      EXPECT_NEAR(v.data[i], (1.0 - 0.98) * g * g, 1e-6 * g * g + 1e-15) << info.name;
    }
  }

  // The clip applies to one step only: the next step's moment adds the full g.
  optimizer.step(1e-3f, 0.5f);
  state = optimizer.export_state();
  const ParameterInfo& info = params_.info(params_.index_of("linear.weight"));
  const double g = params_.grad()[info.offset] * 0.5;
  const double m1 = 0.1 * g * clip;
  EXPECT_NEAR(state.at("adam_m.linear.weight").data[0], 0.9 * m1 + 0.1 * g, 1e-6 * std::abs(g));

  // A gradient below max_norm is not scaled up.
  optimizer.clip(10.0 * unscaled, unscaled);
  params_.grad()[info.offset] = NAN;
  EXPECT_FALSE(optimizer.grads_finite());
}

TEST_F(OptimizerTest, StateRoundTripsByName) {
  Optimizer<double, double> optimizer(params_);
  fill_grads();
  optimizer.step(1e-2f, 1.0f);
  const NamedTensors state = optimizer.export_state();
  EXPECT_EQ(state.size(), 2 * params_.infos().size());
  ASSERT_TRUE(state.count("adam_v.conv.weight"));

  CpuBackend<double> backend(1);
  ParameterStore<double, double> other(backend);
  other.add("norm.weight", {6}, ParameterKind::kNormWeight, 0);
  other.add("norm.bias", {6}, ParameterKind::kNormBias, 0);
  Linear<double, double>(other, "linear", 6, 5);
  other.add("conv.weight", {5, 1, 3}, ParameterKind::kWeight, 3);
  other.allocate(9);
  Optimizer<double, double> restored(other);
  restored.import_state(state, "optimizer.safetensors");
  restored.set_step_count(optimizer.step_count());
  EXPECT_EQ(restored.step_count(), 1);
  for (size_t i = 0; i < params_.size(); ++i) {
    ASSERT_EQ(float(other.adam_m()[i]), float(params_.adam_m()[i]));
    ASSERT_EQ(float(other.adam_v()[i]), float(params_.adam_v()[i]));
  }

  NamedTensors missing = state;
  missing.erase("adam_m.linear.bias");
  try {
    restored.import_state(missing, "optimizer.safetensors");
    FAIL() << "a missing moment was accepted";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::kCheckpoint);
    EXPECT_NE(std::string(error.what()).find("optimizer.safetensors: tensor 'adam_m.linear.bias'"),
              std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace mpiasr
