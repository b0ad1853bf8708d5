// Definitions of SelfAttention (model/attention.h), included by the
// translation units that instantiate it for their <Act, Acc>.
#pragma once

#include "model/attention.h"

namespace mpiasr {

template <typename Act, typename Acc>
SelfAttention<Act, Acc>::SelfAttention(ParameterStore<Act, Acc>& params,
                                       ActivationArena<Act, Acc>& arena, const std::string& name,
                                       int d_model, int n_heads, size_t max_rows, float eps)
    : d_model_(d_model),
      n_heads_(n_heads),
      head_dim_(d_model / n_heads),
      norm_(params, arena, name + ".norm", d_model, max_rows, eps),
      qkv_(params, name + ".qkv", d_model, 3 * d_model),
      out_(params, name + ".out", d_model, d_model) {
  normed_ = arena.template reserve<Act>(max_rows * d_model);
  qkv_out_ = arena.template reserve<Act>(max_rows * 3 * d_model);
  context_ = arena.template reserve<Act>(max_rows * d_model);
  lse_ = arena.template reserve<Acc>(max_rows * n_heads);
}

template <typename Act, typename Acc>
PendingResidual<Act> SelfAttention<Act, Acc>::forward(LayerContext<Act, Acc>& ctx, Act* x,
                                                      const PendingResidual<Act>& in) const {
  Backend<Act, Acc>& be = ctx.backend;
  const int B = ctx.batch, T = ctx.frames, rows = ctx.rows();
  Act* normed = ctx.arena.get(normed_);
  Act* qkv = ctx.arena.get(qkv_out_);
  Act* context = ctx.arena.get(context_);
  Act* y = ctx.scratch_rows(1);

  const Act* x_in = norm_.forward_residual(ctx, x, normed, in);
  qkv_.forward(ctx, qkv, normed, rows);
  be.attention_forward(context, ctx.arena.get(lse_), qkv, ctx.lengths, B, T, n_heads_, head_dim_,
                       scale());
  out_.forward(ctx, y, context, rows);
  return {x_in, y, 1.0f, dropout_offset(out_.weight_index())};
}

template <typename Act, typename Acc>
void SelfAttention<Act, Acc>::backward(LayerContext<Act, Acc>& ctx, Act* dx,
                                       const Act* x_in) const {
  Backend<Act, Acc>& be = ctx.backend;
  const int B = ctx.batch, T = ctx.frames, rows = ctx.rows();
  const Act* qkv = ctx.arena.get(qkv_out_);
  const Act* context = ctx.arena.get(context_);
  Act* dcontext = ctx.scratch_rows(1);
  Act* dqkv = ctx.scratch_wide(0);
  Act* dnormed = ctx.scratch_rows(1);

  const Act* dy = dx;
  if (ctx.dropout > 0.0f) {
    Act* dropped = ctx.scratch_rows(0);
    be.residual_dropout_backward(dropped, dx, 1.0f, ctx.dropout, ctx.dropout_seed,
                                 dropout_offset(out_.weight_index()), size_t(rows) * d_model_);
    dy = dropped;
  }
  out_.backward(ctx, dcontext, dy, context, rows);
  be.attention_backward(dqkv, dcontext, context, ctx.arena.get(lse_), qkv, ctx.lengths, B, T,
                        n_heads_, head_dim_, scale());
  qkv_.backward(ctx, dnormed, dqkv, ctx.arena.get(normed_), rows);
  norm_.backward(ctx, dx, dnormed, x_in);
}

}  // namespace mpiasr
