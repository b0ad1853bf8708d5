// Definitions of FeedForward (model/feed_forward.h), included by the
// translation units that instantiate it for their <Act, Acc>.
#pragma once

#include "model/feed_forward.h"

namespace mpiasr {

template <typename Act, typename Acc>
FeedForward<Act, Acc>::FeedForward(ParameterStore<Act, Acc>& params,
                                   ActivationArena<Act, Acc>& arena, const std::string& name,
                                   int d_model, int hidden, size_t max_rows, float eps)
    : d_model_(d_model),
      hidden_(hidden),
      norm_(params, arena, name + ".norm", d_model, max_rows, eps),
      linear1_(params, name + ".linear1", d_model, hidden),
      linear2_(params, name + ".linear2", hidden, d_model) {
  normed_ = arena.template reserve<Act>(max_rows * d_model);
  pre_activation_ = arena.template reserve<Act>(max_rows * hidden);
  hidden_act_ = arena.template reserve<Act>(max_rows * hidden);
}

template <typename Act, typename Acc>
PendingResidual<Act> FeedForward<Act, Acc>::forward(LayerContext<Act, Acc>& ctx, Act* x,
                                                    const PendingResidual<Act>& in) const {
  Backend<Act, Acc>& be = ctx.backend;
  const int rows = ctx.rows();
  Act* normed = ctx.arena.get(normed_);
  Act* pre = ctx.arena.get(pre_activation_);
  Act* h = ctx.arena.get(hidden_act_);
  Act* y = ctx.scratch_rows(0);

  const Act* x_in = norm_.forward_residual(ctx, x, normed, in);
  linear1_.forward(ctx, pre, normed, rows);
  be.swish_dropout_forward(h, pre, ctx.dropout, ctx.dropout_seed,
                           dropout_offset(linear1_.weight_index()), size_t(rows) * hidden_);
  linear2_.forward(ctx, y, h, rows);
  return {x_in, y, kResidualScale, dropout_offset(linear2_.weight_index())};
}

template <typename Act, typename Acc>
void FeedForward<Act, Acc>::backward(LayerContext<Act, Acc>& ctx, Act* dx, const Act* x_in) const {
  Backend<Act, Acc>& be = ctx.backend;
  const int rows = ctx.rows();
  Act* dy = ctx.scratch_rows(0);
  Act* dnormed = ctx.scratch_rows(1);
  Act* dh = ctx.scratch_wide(0);
  Act* dpre = ctx.scratch_wide(1);

  be.residual_dropout_backward(dy, dx, kResidualScale, ctx.dropout, ctx.dropout_seed,
                               dropout_offset(linear2_.weight_index()), size_t(rows) * d_model_);
  linear2_.backward(ctx, dh, dy, ctx.arena.get(hidden_act_), rows);
  be.swish_dropout_backward(dpre, dh, ctx.arena.get(pre_activation_), ctx.dropout, ctx.dropout_seed,
                            dropout_offset(linear1_.weight_index()), size_t(rows) * hidden_);
  linear1_.backward(ctx, dnormed, dpre, ctx.arena.get(normed_), rows);
  norm_.backward(ctx, dx, dnormed, x_in);
}

}  // namespace mpiasr
