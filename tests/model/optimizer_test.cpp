// The optimizer over a parameter store (fp64): weight decay reaches weights
// only, the norm is the direct sum's unscaled by loss scale and token count,
// clipping scales the gradient by max_norm / (norm + 1e-6), a non-finite
// gradient skips the step, sharded ranges update exactly what the whole
// optimizer does, and the state round-trips by name. (One AdamW step against
// hand arithmetic is the kernel's own test.)
#include "model/optimizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

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

  // One step: inputs, the gradient's sum of squares, the decision, AdamW.
  static void take_step(Optimizer<double, double>& optimizer, float lr, double loss_divisor,
                        const LossScalerRule& scaler = {}) {
    optimizer.set_step_inputs(loss_divisor, lr);
    optimizer.add_grad_sum_squares();
    optimizer.decide(scaler);
    optimizer.step();
  }

  static std::vector<double> flat(const NamedTensors& tensors,
                                  const ParameterStore<double, double>& params,
                                  const std::string& prefix) {
    std::vector<double> out;
    for (const ParameterInfo& info : params.infos()) {
      const HostTensor& t = tensors.at(prefix + info.name);
      out.insert(out.end(), t.data.begin(), t.data.end());
    }
    return out;
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
  take_step(optimizer, lr, 1.0);
  EXPECT_EQ(optimizer.read_control().optimizer_step, 1);
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

TEST_F(OptimizerTest, NormUnscalesByLossScaleAndTokensAndClips) {
  fill_grads();
  double sum = 0.0;
  for (const ParameterInfo& info : params_.infos()) {
    for (size_t i = 0; i < info.count; ++i) sum += std::pow(params_.grad()[info.offset + i], 2);
  }
  // Loss scale 4, 2 tokens: the unscaled gradient is g / 8.
  const LossScalerRule scaler{.enabled = 1};
  const double unscaled = std::sqrt(sum) / 8.0;
  AdamWConfig config;
  config.clip_norm = unscaled / 4.0;
  Optimizer<double, double> optimizer(params_, config);
  optimizer.set_state(0, {4.0f, 0});
  take_step(optimizer, 1e-3f, 2.0, scaler);
  const StepControl control = optimizer.read_control();
  EXPECT_NEAR(control.grad_norm, unscaled, 1e-12 * unscaled);
  EXPECT_EQ(control.apply, 1);
  // First moment after one step: m = (1 - beta1) * g / 8 * clip.
  const double clip = config.clip_norm / (unscaled + 1e-6);
  NamedTensors state = optimizer.export_state();
  for (const ParameterInfo& info : params_.infos()) {
    const HostTensor& m = state.at("adam_m." + info.name);
    const HostTensor& v = state.at("adam_v." + info.name);
    EXPECT_EQ(m.shape, info.shape);
    for (size_t i = 0; i < info.count; ++i) {
      const double g = params_.grad()[info.offset + i] / 8.0 * clip;
      EXPECT_NEAR(m.data[i], (1.0 - 0.9) * g, 1e-6 * std::abs(g) + 1e-12) << info.name;
      EXPECT_NEAR(v.data[i], (1.0 - 0.98) * g * g, 1e-6 * g * g + 1e-15) << info.name;
    }
  }

  // Below clip_norm the gradient is not scaled up: grad_scale is 1 / 8.
  AdamWConfig loose = config;
  loose.clip_norm = 10.0 * unscaled;
  Optimizer<double, double> unclipped(params_, loose);
  unclipped.set_state(0, {4.0f, 0});
  take_step(unclipped, 1e-3f, 2.0, scaler);
  EXPECT_EQ(unclipped.read_control().grad_scale, 0.125f);

  // A non-finite gradient skips the step and halves the scale; nothing moves.
  const NamedTensors masters = params_.export_masters();
  params_.grad()[params_.info(params_.index_of("linear.weight")).offset] = NAN;
  take_step(unclipped, 1e-3f, 2.0, scaler);
  const StepControl skipped = unclipped.read_control();
  EXPECT_EQ(skipped.apply, 0);
  EXPECT_EQ(skipped.scaler.scale, 2.0f);
  EXPECT_EQ(skipped.optimizer_step, 1);
  EXPECT_EQ(skipped.skipped, 1);
  EXPECT_EQ(flat(params_.export_masters(), params_, ""), flat(masters, params_, ""));
  unclipped.clear_sums();
  EXPECT_EQ(unclipped.read_control().skipped, 0);
  EXPECT_EQ(unclipped.read_control().optimizer_step, 1) << "state is not a sum";
}

// Two optimizers that each own half of every "bucket" (as two ranks of ZeRO-1
// do) update the weights exactly as one that owns everything, keep only their
// pieces' moments, and take them back from a checkpoint's full state.
TEST_F(OptimizerTest, ShardedRangesUpdateTheirPiecesLikeTheWhole) {
  fill_grads();
  // Buckets of 64, pieces of 32. Without clipping and loss scaling each
  // shard's decision is the whole one's whatever part of the norm it sees.
  const size_t n = params_.size();
  ASSERT_EQ(n % 64, 0u);
  std::vector<OptimizerRange> shards[2];
  for (size_t begin = 0; begin < n; begin += 64) {
    for (int r = 0; r < 2; ++r) {
      shards[r].push_back({begin + size_t(r) * 32, 32, begin / 2});
    }
  }
  CpuBackend<double> backend(1);
  auto make_store = [&](ParameterStore<double, double>& store) {
    store.add("norm.weight", {6}, ParameterKind::kNormWeight, 0);
    store.add("norm.bias", {6}, ParameterKind::kNormBias, 0);
    Linear<double, double>(store, "linear", 6, 5);
    store.add("conv.weight", {5, 1, 3}, ParameterKind::kWeight, 3);
    store.allocate(3);
    std::copy_n(params_.grad(), n, store.grad());
  };
  ParameterStore<double, double> sharded(backend);
  make_store(sharded);
  Optimizer<double, double> whole(params_);
  Optimizer<double, double> rank0(sharded, {}, shards[0]), rank1(sharded, {}, shards[1]);
  EXPECT_EQ(rank0.state_elements(), n / 2);
  for (int step = 0; step < 3; ++step) {
    take_step(whole, 1e-2f, 3.0);
    take_step(rank0, 1e-2f, 3.0);
    take_step(rank1, 1e-2f, 3.0);
  }
  for (size_t i = 0; i < n; ++i) ASSERT_EQ(sharded.master()[i], params_.master()[i]) << i;

  // Their moments, put back at the pieces' offsets, are the whole optimizer's.
  std::vector<double> m(n, -1.0), v(n, -1.0);
  for (int r = 0; r < 2; ++r) {
    const std::vector<double> moments = (r == 0 ? rank0 : rank1).moments_to_host();
    for (const OptimizerRange& range : shards[r]) {
      for (size_t i = 0; i < range.count; ++i) {
        m[range.offset + i] = moments[range.state_offset + i];
        v[range.offset + i] = moments[n / 2 + range.state_offset + i];
      }
    }
  }
  const NamedTensors state = whole.export_state();
  EXPECT_EQ(flat(rank0.state_tensors(m, v), params_, "adam_m."), flat(state, params_, "adam_m."));
  EXPECT_EQ(flat(rank0.state_tensors(m, v), params_, "adam_v."), flat(state, params_, "adam_v."));
  Optimizer<double, double> restored(sharded, {}, shards[1]);
  restored.import_state(state, "optimizer.safetensors");
  EXPECT_EQ(restored.moments_to_host(), rank1.moments_to_host());
  EXPECT_THROW(rank0.export_state(), Error) << "a shard is gathered by the trainer";
}

// AdamW's segments (one backend call per step) tile the optimizer's state in
// order, each element of the buffer at most once, with its tensor's decay;
// the alignment gaps they cover hold zeros and keep them.
TEST_F(OptimizerTest, SegmentsTileTheStateWithEachTensorsDecay) {
  fill_grads();
  AdamWConfig config;
  config.weight_decay = 0.1f;
  const size_t n = params_.size();
  std::vector<float> decay(n, -1.0f);  // of each element's tensor; -1 in gaps
  for (const ParameterInfo& info : params_.infos()) {
    std::fill_n(decay.begin() + long(info.offset), info.count,
                info.kind == ParameterKind::kWeight ? config.weight_decay : 0.0f);
  }
  std::vector<OptimizerRange> odd_pieces;  // a rank's pieces: [32, 64), [96, 128), ...
  for (size_t begin = 32; begin < n; begin += 64) odd_pieces.push_back({begin, 32, begin / 2 - 16});
  for (const std::vector<OptimizerRange>& ranges : {std::vector<OptimizerRange>{}, odd_pieces}) {
    Optimizer<double, double> optimizer(params_, config, ranges);
    std::vector<int> covered(n, 0);
    size_t state = 0;
    for (const AdamWSegment& segment : optimizer.segments()) {
      EXPECT_EQ(segment.state_offset, state);
      state += segment.count;
      for (size_t i = segment.offset; i < segment.offset + segment.count; ++i) {
        ++covered[i];
        if (decay[i] >= 0.0f) {
          EXPECT_EQ(segment.weight_decay, decay[i]) << "element " << i;
        }
      }
    }
    EXPECT_EQ(state, optimizer.state_elements());
    for (size_t i = 0; i < n; ++i) {
      const bool mine = ranges.empty() || (i / 32) % 2 == 1;
      EXPECT_EQ(covered[i], mine ? 1 : 0) << "element " << i;
    }
  }
  Optimizer<double, double> optimizer(params_, config);
  take_step(optimizer, 0.5f, 1.0);
  for (size_t i = 0; i < n; ++i) {
    if (decay[i] < 0.0f) {
      EXPECT_EQ(params_.master()[i], 0.0) << "gap element " << i;
    }
  }
  EXPECT_GT(optimizer.segments().size(), 1u);
}

TEST_F(OptimizerTest, StateRoundTripsByName) {
  Optimizer<double, double> optimizer(params_);
  fill_grads();
  take_step(optimizer, 1e-2f, 1.0);
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
  restored.set_state(optimizer.read_control().optimizer_step, {1.0f, 0});
  EXPECT_EQ(restored.read_control().optimizer_step, 1);
  const std::vector<double> moments = optimizer.moments_to_host();
  const std::vector<double> back = restored.moments_to_host();
  ASSERT_EQ(back.size(), moments.size());
  for (size_t i = 0; i < moments.size(); ++i) {
    ASSERT_EQ(back[i], double(float(moments[i]))) << "checkpoints hold float32, element " << i;
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
