// Multi-head self-attention with rotary position embedding and a key padding
// mask, pre-norm, as one Conformer sub-layer (H heads of Dh = d / H):
//
//   [q k v] = split(LN(x) Wqkv^T + bqkv)        Wqkv [3d, d], qkv [B, T, 3, H, Dh]
//   q, k    = RoPE(q), RoPE(k)                  q, k, v [B, H, T, Dh]
//   P       = masked_softmax(q k^T / sqrt(Dh))  P [B, H, T, T], keys s >= L_b get 0
//   out     = x + Dropout(merge(P v) Wo^T + bo) Wo [d, d]
//
// Saved for backward: LN(x), q, k, v, P and the merged context [rows, d].
// Backward (per head, G = dP):  dv = P^T dctx,  dP = dctx v^T,
//   dS = softmax'(dP),  dq = dS k / sqrt(Dh),  dk = dS^T q / sqrt(Dh).
#pragma once

#include <string>

#include "model/layer_context.h"
#include "model/layer_norm.h"
#include "model/linear.h"

namespace mpiasr {

template <typename Act, typename Acc>
class SelfAttention {
 public:
  SelfAttention(ParameterStore<Act, Acc>& params, ActivationArena<Act, Acc>& arena,
                const std::string& name, int d_model, int n_heads, size_t max_rows,
                size_t max_score_rows, float eps);

  // x_out = x_in + MHSA(LN(x_in)), both [B, T, d]; x_out must not alias x_in.
  void forward(LayerContext<Act, Acc>& ctx, Act* x_out, const Act* x_in) const;
  // dx: on entry d loss / d x_out, on exit d loss / d x_in (updated in place).
  void backward(LayerContext<Act, Acc>& ctx, Act* dx, const Act* x_in) const;

  // Elements of one [B, H, T, T] score tensor for the largest B x T x T.
  static size_t score_elements(size_t max_score_rows, int n_heads) {
    return max_score_rows * size_t(n_heads);
  }

 private:
  int d_model_, n_heads_, head_dim_;
  LayerNorm<Act, Acc> norm_;
  Linear<Act, Acc> qkv_, out_;
  ArenaSlot<Act> normed_, q_, k_, v_, probs_, merged_;
};

extern template class SelfAttention<float, float>;
extern template class SelfAttention<double, double>;

}  // namespace mpiasr
