// Definitions of ConvSubsampling (model/subsampling.h), included by the
// translation units that instantiate it for their <Act, Acc>.
#pragma once

#include "model/presets.h"
#include "model/subsampling.h"

namespace mpiasr {

template <typename Act, typename Acc>
ConvSubsampling<Act, Acc>::ConvSubsampling(ParameterStore<Act, Acc>& params,
                                           ActivationArena<Act, Acc>& arena,
                                           const std::string& name, int n_mels, int channels,
                                           int d_model, const BatchShapes& shapes, bool da1_scratch)
    : n_mels_(n_mels), channels_(channels), d_model_(d_model), da1_scratch_(da1_scratch) {
  const int C = channels;
  conv0_weight_ = params.add(name + ".conv.0.weight", {C, 1, 3, 3}, ParameterKind::kWeight, 9);
  conv0_bias_ = params.add(name + ".conv.0.bias", {C}, ParameterKind::kBias, 9);
  conv2_weight_ = params.add(name + ".conv.2.weight", {C, C, 3, 3}, ParameterKind::kWeight, 9 * C);
  conv2_bias_ = params.add(name + ".conv.2.bias", {C}, ParameterKind::kBias, 9 * C);
  out_ = Linear<Act, Acc>(params, name + ".out", subsampled_bins(n_mels) * C, d_model);

  // Rows of each stage: B x T, B x T1, B x T2 at most (model/batch_shapes.h).
  const size_t BT = shapes.input_rows(), BT1 = shapes.conv1_rows(), BT2 = shapes.rows();
  const size_t F1 = size_t((n_mels - 1) / 2), F2 = subsampled_bins(n_mels);
  input_ = arena.template reserve<Act>(BT * n_mels);
  a1_ = arena.template reserve<Act>(BT1 * F1 * C);
  a2_ = arena.template reserve<Act>(BT2 * F2 * C);
  output_ = arena.template reserve<Act>(BT2 * d_model);
  if (da1_scratch) da1_ = arena.template reserve<Act>(BT1 * F1 * C);
  da2_ = arena.template reserve<Act>(BT2 * F2 * C);
}

template <typename Act, typename Acc>
const Act* ConvSubsampling<Act, Acc>::forward(LayerContext<Act, Acc>& ctx, const float* features,
                                              int input_frames) const {
  Backend<Act, Acc>& be = ctx.backend;
  const int B = ctx.batch, T = input_frames, C = channels_;
  const int T1 = (T - 1) / 2, F1 = (n_mels_ - 1) / 2, T2 = ctx.frames;
  const size_t n_input = size_t(B) * T * n_mels_;
  Act* input = ctx.arena.get(input_);
  Act* a1 = ctx.arena.get(a1_);
  Act* a2 = ctx.arena.get(a2_);
  Act* output = ctx.arena.get(output_);

  be.cast_f32_to_act(input, be.upload_input(features, n_input), n_input);
  be.conv2d_forward(a1, input, ctx.params.weight(conv0_weight_), ctx.params.weight(conv0_bias_), B,
                    1, T, n_mels_, C, true);
  be.conv2d_forward(a2, a1, ctx.params.weight(conv2_weight_), ctx.params.weight(conv2_bias_), B, C,
                    T1, F1, C, true);
  out_.forward(ctx, output, a2, B * T2);
  be.mask_padding(output, ctx.lengths, B, T2, d_model_);
  return output;
}

template <typename Act, typename Acc>
void ConvSubsampling<Act, Acc>::backward(
    LayerContext<Act, Acc>& ctx, Act* dx, int input_frames,
    const std::function<void(int, int)>& parameters_ready) const {
  Backend<Act, Acc>& be = ctx.backend;
  const int B = ctx.batch, T = input_frames, C = channels_;
  const int T1 = (T - 1) / 2, F1 = (n_mels_ - 1) / 2, T2 = ctx.frames, F2 = (F1 - 1) / 2;
  const Act* a1 = ctx.arena.get(a1_);
  const Act* a2 = ctx.arena.get(a2_);
  Act* da2 = ctx.arena.get(da2_);
  const auto ready = [&](int first, int last) {
    if (parameters_ready) parameters_ready(first, last);
  };

  // ReLU's derivative is read from its output: relu(z) > 0 exactly when z > 0.
  be.mask_padding(dx, ctx.lengths, B, T2, d_model_);
  out_.backward(ctx, da2, dx, a2, B * T2);
  ready(out_.weight_index(), out_.bias_index() + 1);
  be.relu_backward(da2, da2, a2, size_t(B) * T2 * F2 * C);
  be.conv2d_backward(nullptr, ctx.params.grad(conv2_weight_), ctx.params.grad(conv2_bias_), da2, a1,
                     ctx.params.weight(conv2_weight_), B, C, T1, F1, C);
  ready(conv2_weight_, conv2_bias_ + 1);
  be.subsampling_first_conv_backward(ctx.params.grad(conv0_weight_), ctx.params.grad(conv0_bias_),
                                     da2, a1, ctx.arena.get(input_),
                                     ctx.params.weight(conv2_weight_), B, T, n_mels_, C,
                                     da1_scratch_ ? ctx.arena.get(da1_) : nullptr);
  ready(conv0_weight_, conv0_bias_ + 1);
}

}  // namespace mpiasr
