// Definitions of ConvModule (model/conv_module.h), included by the
// translation units that instantiate it for their <Act, Acc>.
#pragma once

#include "model/conv_module.h"

namespace mpiasr {

template <typename Act, typename Acc>
ConvModule<Act, Acc>::ConvModule(ParameterStore<Act, Acc>& params, ActivationArena<Act, Acc>& arena,
                                 const std::string& name, int d_model, int kernel, size_t max_rows,
                                 float eps)
    : d_model_(d_model),
      kernel_(kernel),
      norm_(params, arena, name + ".norm", d_model, max_rows, eps),
      pointwise1_(params, name + ".pointwise1", d_model, 2 * d_model) {
  depthwise_weight_ =
      params.add(name + ".depthwise.weight", {d_model, 1, kernel}, ParameterKind::kWeight, kernel);
  depthwise_bias_ = params.add(name + ".depthwise.bias", {d_model}, ParameterKind::kBias, kernel);
  conv_norm_ = LayerNorm<Act, Acc>(params, arena, name + ".conv_norm", d_model, max_rows, eps);
  pointwise2_ = Linear<Act, Acc>(params, name + ".pointwise2", d_model, d_model);
  normed_ = arena.template reserve<Act>(max_rows * d_model);
  pointwise_ = arena.template reserve<Act>(max_rows * 2 * d_model);
  conv_ = arena.template reserve<Act>(max_rows * d_model);
  conv_normed_ = arena.template reserve<Act>(max_rows * d_model);
  swished_ = arena.template reserve<Act>(max_rows * d_model);
}

template <typename Act, typename Acc>
PendingResidual<Act> ConvModule<Act, Acc>::forward(LayerContext<Act, Acc>& ctx, Act* x,
                                                   const PendingResidual<Act>& in) const {
  Backend<Act, Acc>& be = ctx.backend;
  const int rows = ctx.rows();
  Act* normed = ctx.arena.get(normed_);
  Act* pointwise = ctx.arena.get(pointwise_);
  Act* conv = ctx.arena.get(conv_);
  Act* conv_normed = ctx.arena.get(conv_normed_);
  Act* swished = ctx.arena.get(swished_);
  Act* y = ctx.scratch_rows(0);

  const Act* x_in = norm_.forward_residual(ctx, x, normed, in);
  pointwise1_.forward(ctx, pointwise, normed, rows);
  be.glu_depthwise_conv1d_forward(conv, pointwise, ctx.params.weight(depthwise_weight_),
                                  ctx.params.weight(depthwise_bias_), ctx.lengths, ctx.batch,
                                  ctx.frames, d_model_, kernel_);
  conv_norm_.forward_swish(ctx, conv_normed, swished, conv);
  pointwise2_.forward(ctx, y, swished, rows);
  return {x_in, y, 1.0f, dropout_offset(pointwise2_.weight_index())};
}

template <typename Act, typename Acc>
void ConvModule<Act, Acc>::backward(LayerContext<Act, Acc>& ctx, Act* dx, const Act* x_in) const {
  Backend<Act, Acc>& be = ctx.backend;
  const int rows = ctx.rows();
  Act* dswished = ctx.scratch_rows(1);
  Act* dconv = ctx.scratch_rows(2);
  Act* dpointwise = ctx.scratch_wide(0);
  Act* dnormed = ctx.scratch_rows(1);

  const Act* dy = dx;
  if (ctx.dropout > 0.0f) {
    Act* dropped = ctx.scratch_rows(0);
    be.residual_dropout_backward(dropped, dx, 1.0f, ctx.dropout, ctx.dropout_seed,
                                 dropout_offset(pointwise2_.weight_index()),
                                 size_t(rows) * d_model_);
    dy = dropped;
  }
  pointwise2_.backward(ctx, dswished, dy, ctx.arena.get(swished_), rows);
  conv_norm_.backward_swish(ctx, dconv, dswished, ctx.arena.get(conv_),
                            ctx.arena.get(conv_normed_));
  be.glu_depthwise_conv1d_backward(dpointwise, ctx.params.grad(depthwise_weight_),
                                   ctx.params.grad(depthwise_bias_), dconv,
                                   ctx.arena.get(pointwise_), ctx.params.weight(depthwise_weight_),
                                   ctx.lengths, ctx.batch, ctx.frames, d_model_, kernel_);
  pointwise1_.backward(ctx, dnormed, dpointwise, ctx.arena.get(normed_), rows);
  norm_.backward(ctx, dx, dnormed, x_in);
}

}  // namespace mpiasr
