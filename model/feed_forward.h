// The Conformer's half-step feed-forward module (Macaron FFN), rows = B * T:
//
//   h   = Dropout(Swish(LN(x) W1^T + b1))      W1 [F, d]  (F = ff_mult * d)
//   out = x + 1/2 * Dropout(h W2^T + b2)       W2 [d, F]
//
// The residual sum is left pending for the next sub-layer's LayerNorm to add
// (PendingResidual), as the sum before it is added by this one's.
// Saved for backward: LN(x) [rows, d], the pre-activation [rows, F] and h
// [rows, F]. Dropout masks are regenerated from (seed, offset) in backward.
#pragma once

#include <string>

#include "model/layer_context.h"
#include "model/layer_norm.h"
#include "model/linear.h"

namespace mpiasr {

template <typename Act, typename Acc>
class FeedForward {
 public:
  static constexpr float kResidualScale = 0.5f;

  FeedForward(ParameterStore<Act, Acc>& params, ActivationArena<Act, Acc>& arena,
              const std::string& name, int d_model, int hidden, size_t max_rows, float eps);

  // x_in = the sum `in` (written to x when it has a branch; x [rows, d]);
  // returns the pending x_in + 1/2 Dropout(FFN(x_in)).
  PendingResidual<Act> forward(LayerContext<Act, Acc>& ctx, Act* x,
                               const PendingResidual<Act>& in) const;
  // dx: on entry d loss / d x_out, on exit d loss / d x_in (updated in place).
  void backward(LayerContext<Act, Acc>& ctx, Act* dx, const Act* x_in) const;

 private:
  int d_model_, hidden_;
  LayerNorm<Act, Acc> norm_;
  Linear<Act, Acc> linear1_, linear2_;
  ArenaSlot<Act> normed_, pre_activation_, hidden_act_;
};

extern template class FeedForward<float, float>;
extern template class FeedForward<double, double>;

}  // namespace mpiasr
