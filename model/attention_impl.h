// Definitions of SelfAttention (model/attention.h), included by the
// translation units that instantiate it for their <Act, Acc>.
#pragma once

#include <cmath>

#include "model/attention.h"

namespace mpiasr {

template <typename Act, typename Acc>
SelfAttention<Act, Acc>::SelfAttention(ParameterStore<Act, Acc>& params,
                                       ActivationArena<Act, Acc>& arena, const std::string& name,
                                       int d_model, int n_heads, size_t max_rows,
                                       size_t max_score_rows, float eps)
    : d_model_(d_model),
      n_heads_(n_heads),
      head_dim_(d_model / n_heads),
      norm_(params, arena, name + ".norm", d_model, max_rows, eps),
      qkv_(params, name + ".qkv", d_model, 3 * d_model),
      out_(params, name + ".out", d_model, d_model) {
  const size_t rows_d = max_rows * d_model;
  normed_ = arena.template reserve<Act>(rows_d);
  q_ = arena.template reserve<Act>(rows_d);
  k_ = arena.template reserve<Act>(rows_d);
  v_ = arena.template reserve<Act>(rows_d);
  probs_ = arena.template reserve<Act>(score_elements(max_score_rows, n_heads));
  merged_ = arena.template reserve<Act>(rows_d);
}

template <typename Act, typename Acc>
void SelfAttention<Act, Acc>::forward(LayerContext<Act, Acc>& ctx, Act* x_out,
                                      const Act* x_in) const {
  Backend<Act, Acc>& be = ctx.backend;
  const int B = ctx.batch, T = ctx.frames, H = n_heads_, Dh = head_dim_, rows = ctx.rows();
  const int64_t head_stride = int64_t(T) * Dh, score_stride = int64_t(T) * T;
  const float scale = float(1.0 / std::sqrt(double(Dh)));
  Act* normed = ctx.arena.get(normed_);
  Act* q = ctx.arena.get(q_);
  Act* k = ctx.arena.get(k_);
  Act* v = ctx.arena.get(v_);
  Act* probs = ctx.arena.get(probs_);
  Act* merged = ctx.arena.get(merged_);
  Act* qkv = ctx.scratch_wide(0);
  Act* scores = ctx.scratch_scores(0);
  Act* context = ctx.scratch_rows(0);
  Act* y = ctx.scratch_rows(1);

  norm_.forward(ctx, normed, x_in);
  qkv_.forward(ctx, qkv, normed, rows);
  be.qkv_split_rope_forward(q, k, v, qkv, B, T, H, Dh);
  be.gemm(false, true, T, T, Dh, scale, q, Dh, head_stride, k, Dh, head_stride, 0.0f, scores, T,
          score_stride, B * H);
  be.masked_softmax_forward(probs, scores, ctx.lengths, B, H, T);
  be.gemm(false, false, T, Dh, T, 1.0f, probs, T, score_stride, v, Dh, head_stride, 0.0f, context,
          Dh, head_stride, B * H);
  be.merge_heads_forward(merged, context, B, T, H, Dh);
  out_.forward(ctx, y, merged, rows);
  if (ctx.dropout > 0.0f) {
    be.dropout_forward(y, y, ctx.dropout, ctx.dropout_seed, dropout_offset(out_.weight_index()),
                       size_t(rows) * d_model_);
  }
  be.add_scaled(x_out, x_in, y, 1.0f, size_t(rows) * d_model_);
}

template <typename Act, typename Acc>
void SelfAttention<Act, Acc>::backward(LayerContext<Act, Acc>& ctx, Act* dx,
                                       const Act* x_in) const {
  Backend<Act, Acc>& be = ctx.backend;
  const int B = ctx.batch, T = ctx.frames, H = n_heads_, Dh = head_dim_, rows = ctx.rows();
  const int64_t head_stride = int64_t(T) * Dh, score_stride = int64_t(T) * T;
  const float scale = float(1.0 / std::sqrt(double(Dh)));
  const Act* q = ctx.arena.get(q_);
  const Act* k = ctx.arena.get(k_);
  const Act* v = ctx.arena.get(v_);
  const Act* probs = ctx.arena.get(probs_);
  Act* dmerged = ctx.scratch_rows(1);
  Act* dcontext = ctx.scratch_rows(2);
  Act* dq = ctx.scratch_rows(3);
  Act* dk = ctx.scratch_rows(4);
  Act* dv = ctx.scratch_rows(5);
  Act* dprobs = ctx.scratch_scores(0);
  Act* dscores = ctx.scratch_scores(1);
  Act* dqkv = ctx.scratch_wide(0);
  Act* dnormed = ctx.scratch_rows(1);

  const Act* dy = dx;
  if (ctx.dropout > 0.0f) {
    Act* dropped = ctx.scratch_rows(0);
    be.dropout_backward(dropped, dx, ctx.dropout, ctx.dropout_seed,
                        dropout_offset(out_.weight_index()), size_t(rows) * d_model_);
    dy = dropped;
  }
  out_.backward(ctx, dmerged, dy, ctx.arena.get(merged_), rows);
  be.merge_heads_backward(dcontext, dmerged, B, T, H, Dh);
  be.gemm(false, true, T, T, Dh, 1.0f, dcontext, Dh, head_stride, v, Dh, head_stride, 0.0f, dprobs,
          T, score_stride, B * H);
  be.gemm(true, false, T, Dh, T, 1.0f, probs, T, score_stride, dcontext, Dh, head_stride, 0.0f, dv,
          Dh, head_stride, B * H);
  be.masked_softmax_backward(dscores, dprobs, probs, B, H, T);
  be.gemm(false, false, T, Dh, T, scale, dscores, T, score_stride, k, Dh, head_stride, 0.0f, dq, Dh,
          head_stride, B * H);
  be.gemm(true, false, T, Dh, T, scale, dscores, T, score_stride, q, Dh, head_stride, 0.0f, dk, Dh,
          head_stride, B * H);
  be.qkv_split_rope_backward(dqkv, dq, dk, dv, B, T, H, Dh);
  qkv_.backward(ctx, dnormed, dqkv, ctx.arena.get(normed_), rows);
  norm_.backward(ctx, dx, dnormed, x_in);
}

}  // namespace mpiasr
