// Multi-head self-attention with rotary position embedding and a key padding
// mask, pre-norm, as one Conformer sub-layer (H heads of Dh = d / H):
//
//   qkv = LN(x) Wqkv^T + bqkv                   Wqkv [3d, d], qkv [B, T, 3, H, Dh]
//   ctx = attention(qkv)                        [B, T, H, Dh] = [rows, d]:
//         q, k = RoPE(q), RoPE(k); P = softmax(q k^T / sqrt(Dh)) with keys
//         s >= L_b masked out; ctx = P v (Backend::attention_forward, fused)
//   out = x + Dropout(ctx Wo^T + bo)            Wo [d, d]
//
// The residual sum is left pending for the next sub-layer's LayerNorm to add
// (PendingResidual), as the sum before it is added by this one's.
// Saved for backward: LN(x), qkv, ctx [rows, d] and the log-sum-exp of each
// row of scores [B, H, T], from which attention_backward recomputes P: the
// layer keeps O(B T d), nothing of size T x T.
#pragma once

#include <cmath>
#include <string>

#include "model/layer_context.h"
#include "model/layer_norm.h"
#include "model/linear.h"

namespace mpiasr {

template <typename Act, typename Acc>
class SelfAttention {
 public:
  SelfAttention(ParameterStore<Act, Acc>& params, ActivationArena<Act, Acc>& arena,
                const std::string& name, int d_model, int n_heads, size_t max_rows, float eps);

  // x_in = the sum `in` (written to x when it has a branch; x [B, T, d]);
  // returns the pending x_in + Dropout(MHSA(LN(x_in))).
  PendingResidual<Act> forward(LayerContext<Act, Acc>& ctx, Act* x,
                               const PendingResidual<Act>& in) const;
  // dx: on entry d loss / d x_out, on exit d loss / d x_in (updated in place).
  void backward(LayerContext<Act, Acc>& ctx, Act* dx, const Act* x_in) const;

 private:
  // The score scale 1 / sqrt(Dh).
  float scale() const { return float(1.0 / std::sqrt(double(head_dim_))); }

  int d_model_, n_heads_, head_dim_;
  LayerNorm<Act, Acc> norm_;
  Linear<Act, Acc> qkv_, out_;
  ArenaSlot<Act> normed_, qkv_out_, context_;
  ArenaSlot<Acc> lse_;
};

extern template class SelfAttention<float, float>;
extern template class SelfAttention<double, double>;

}  // namespace mpiasr
