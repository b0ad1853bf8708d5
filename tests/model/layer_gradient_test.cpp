// Every layer's backward against central finite differences in fp64: the
// loss is sum(r * layer_output) with fixed random r, so its gradient with
// respect to the output is r. Checked for the input stream and for every
// parameter tensor (largest-gradient element plus random ones), with dropout
// off and on (the masks are a pure function of the seed, so the loss stays a
// smooth function of the weights). Batches have a padded utterance.
#include <gtest/gtest.h>

#include <functional>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "model/attention.h"
#include "model/conformer_block.h"
#include "model/conv_module.h"
#include "model/feed_forward.h"
#include "model/presets.h"
#include "model/subsampling.h"
#include "tests/model/gradient_check.h"

namespace mpiasr {
namespace {

using testing::check_gradient;
using testing::random_values;

class LayerGradientTest : public ::testing::Test {
 protected:
  static constexpr int kBatch = 2, kFrames = 7, kModel = 8, kHeads = 2, kHidden = 16;
  static constexpr int kKernel = 5;
  static constexpr float kEps = 1e-5f;

  void allocate() {
    workspace_.reserve(arena_, size_t(kBatch) * kFrames, kModel, 3 * kHidden);
    params_.allocate(17);
    arena_.allocate();
  }

  LayerContext<double, double> context(float dropout, int frames = kFrames) {
    LayerContext<double, double> ctx{backend_, params_, arena_, workspace_};
    ctx.batch = kBatch;
    ctx.frames = frames;
    ctx.lengths = lengths_.data();
    ctx.dropout = dropout;
    ctx.dropout_seed = 99;
    return ctx;
  }

  // Checks d sum(r * forward()) against finite differences for every parameter
  // tensor and, when input is given, for the input. backward(r, dinput) must
  // accumulate the parameter gradients and write the input gradient.
  void check(const std::function<const double*()>& forward, size_t out_size,
             const std::function<void(const double* r, double* dinput)>& backward,
             std::vector<double>* input) {
    const std::vector<double> r = random_values(out_size, 5);
    auto loss = [&] {
      const double* out = forward();
      double total = 0.0;
      for (size_t i = 0; i < out_size; ++i) total += r[i] * out[i];
      return total;
    };
    params_.zero_grad();
    loss();
    std::vector<double> dinput(input ? input->size() : 0);
    backward(r.data(), input ? dinput.data() : nullptr);
    const std::vector<double> grads(params_.grad(), params_.grad() + params_.size());

    int seed = 0;
    for (const ParameterInfo& info : params_.infos()) {
      double largest = 0.0;
      for (size_t i = 0; i < info.count; ++i) {
        largest = std::max(largest, std::abs(grads[info.offset + i]));
      }
      EXPECT_GT(largest, 0.0) << info.name << " gets no gradient";
      check_gradient(info.name, grads.data() + info.offset, params_.master() + info.offset,
                     info.count, loss, 4, ++seed);
    }
    if (input) {
      check_gradient("input", dinput.data(), input->data(), input->size(), loss, 16, 1234);
    }
  }

  CpuBackend<double> backend_{1};
  ParameterStore<double, double> params_{backend_};
  ActivationArena<double, double> arena_{backend_};
  Workspace<double> workspace_;
  std::vector<int32_t> lengths_{kFrames, kFrames - 3};
};

// The residual sub-layers share one form: x_out = x_in + f(x_in), backward in
// place. Forward leaves the sum pending (PendingResidual); the test adds it as
// the next LayerNorm would (Backend::residual_layernorm_forward).
class ResidualLayerTest : public LayerGradientTest, public ::testing::WithParamInterface<float> {
 protected:
  template <typename Layer>
  void run(const Layer& layer) {
    const float dropout = GetParam();
    const int rows = kBatch * kFrames;
    const size_t n = size_t(rows) * kModel;
    std::vector<double> x = random_values(n, 3);
    std::vector<double> out(n), normed(n);
    auto forward = [&]() -> const double* {
      LayerContext<double, double> ctx = context(dropout);
      const PendingResidual<double> sum =
          layer.forward(ctx, nullptr, PendingResidual<double>{x.data()});
      EXPECT_EQ(sum.base, x.data());
      backend_.residual_layernorm_forward(out.data(), normed.data(), nullptr, nullptr, sum.base,
                                          sum.branch, sum.scale, ctx.dropout, ctx.dropout_seed,
                                          sum.dropout_offset, nullptr, nullptr, rows, kModel, kEps);
      return out.data();
    };
    auto backward = [&](const double* r, double* dx) {
      std::copy(r, r + n, dx);
      LayerContext<double, double> ctx = context(dropout);
      layer.backward(ctx, dx, x.data());
    };
    check(forward, n, backward, &x);
  }
};

TEST_P(ResidualLayerTest, FeedForward) {
  FeedForward<double, double> layer(params_, arena_, "ff", kModel, kHidden, kBatch * kFrames, kEps);
  allocate();
  run(layer);
}

TEST_P(ResidualLayerTest, SelfAttention) {
  SelfAttention<double, double> layer(params_, arena_, "attn", kModel, kHeads,
                                      size_t(kBatch) * kFrames, kEps);
  allocate();
  run(layer);
}

TEST_P(ResidualLayerTest, ConvModule) {
  ConvModule<double, double> layer(params_, arena_, "conv", kModel, kKernel, kBatch * kFrames,
                                   kEps);
  allocate();
  run(layer);
}

INSTANTIATE_TEST_SUITE_P(Dropout, ResidualLayerTest, ::testing::Values(0.0f, 0.2f));

TEST_F(LayerGradientTest, ConformerBlock) {
  ConformerConfig config;
  config.d_model = kModel;
  config.n_heads = kHeads;
  config.ff_mult = kHidden / kModel;
  config.conv_kernel = kKernel;
  ConformerBlock<double, double> block(params_, arena_, "block", config, size_t(kBatch) * kFrames);
  allocate();
  const size_t n = size_t(kBatch) * kFrames * kModel;
  std::vector<double> x = random_values(n, 3);
  for (float dropout : {0.0f, 0.2f}) {
    auto forward = [&] {
      LayerContext<double, double> ctx = context(dropout);
      return block.forward(ctx, x.data());
    };
    auto backward = [&](const double* r, double* dx) {
      LayerContext<double, double> ctx = context(dropout);
      block.backward(ctx, x.data(), r, dx);
    };
    check(forward, n, backward, &x);
  }
}

TEST_F(LayerGradientTest, ConvSubsampling) {
  // 23 input frames -> 11 -> 5 output frames; 15 mel bins -> 7 -> 3.
  constexpr int kMels = 15, kInputFrames = 23, kChannels = 3;
  const int out_frames = subsampled_frames(kInputFrames);
  ASSERT_EQ(out_frames, 5);
  lengths_ = {out_frames, subsampled_frames(kInputFrames - 6)};
  ConvSubsampling<double, double> layer(params_, arena_, "sub", kMels, kChannels, kModel,
                                        BatchShapes(kBatch, kInputFrames),
                                        backend_.subsampling_da1_scratch());
  allocate();
  std::vector<float> features(size_t(kBatch) * kInputFrames * kMels);
  std::vector<double> values = random_values(features.size(), 11);
  for (size_t i = 0; i < features.size(); ++i) features[i] = float(values[i]);
  const size_t n = size_t(kBatch) * out_frames * kModel;
  auto forward = [&] {
    LayerContext<double, double> ctx = context(0.0f, out_frames);
    return layer.forward(ctx, features.data(), kInputFrames);
  };
  // Each parameter is reported ready once, and what it held then is its
  // final gradient (backward does not touch it afterwards).
  const std::vector<ParameterInfo>& infos = params_.infos();
  std::vector<int> reported(infos.size(), 0);
  std::vector<std::vector<double>> at_report(infos.size());
  auto parameters_ready = [&](int first, int last) {
    for (int p = first; p < last; ++p) {
      ++reported[size_t(p)];
      const double* grad = params_.grad() + infos[size_t(p)].offset;
      at_report[size_t(p)].assign(grad, grad + infos[size_t(p)].count);
    }
  };
  std::vector<double> dx(n);
  auto backward = [&](const double* r, double*) {
    std::copy(r, r + n, dx.begin());
    LayerContext<double, double> ctx = context(0.0f, out_frames);
    layer.backward(ctx, dx.data(), kInputFrames, parameters_ready);
  };
  check(forward, n, backward, nullptr);
  for (size_t p = 0; p < infos.size(); ++p) {
    ASSERT_EQ(reported[p], 1) << infos[p].name;
    const double* grad = params_.grad() + infos[p].offset;
    EXPECT_EQ(at_report[p], std::vector<double>(grad, grad + infos[p].count)) << infos[p].name;
  }
}

}  // namespace
}  // namespace mpiasr
