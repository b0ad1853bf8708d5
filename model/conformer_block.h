// One Conformer block (Gulati et al. 2020), rows = B * T, all streams [rows, d]:
//
//   x1 = x0 + 1/2 FFN1(x0)      (each sub-layer normalizes its own input)
//   x2 = x1 + MHSA(x1)
//   x3 = x2 + Conv(x2)
//   x4 = x3 + 1/2 FFN2(x3)
//   y  = LN(x4)
//
// The block keeps x1..x4 and y in the arena (x0 belongs to the caller); the
// sub-layers keep what their own backward needs. Each residual sum is added by
// the LayerNorm that follows it, in the same pass (PendingResidual).
#pragma once

#include <string>

#include "model/attention.h"
#include "model/conv_module.h"
#include "model/feed_forward.h"
#include "model/layer_context.h"
#include "model/layer_norm.h"

namespace mpiasr {

struct ConformerConfig;

template <typename Act, typename Acc>
class ConformerBlock {
 public:
  ConformerBlock(ParameterStore<Act, Acc>& params, ActivationArena<Act, Acc>& arena,
                 const std::string& name, const ConformerConfig& config, size_t max_rows);

  // Runs the block on x0 and returns y (in the arena, valid until the next forward).
  const Act* forward(LayerContext<Act, Acc>& ctx, const Act* x0) const;
  // From d_out = d loss / d y computes d_in = d loss / d x0 (overwritten).
  void backward(LayerContext<Act, Acc>& ctx, const Act* x0, const Act* d_out, Act* d_in) const;

  // The block's tensors in the parameter store: indices [first, last).
  int first_parameter() const { return first_parameter_; }
  int last_parameter() const { return last_parameter_; }

 private:
  int d_model_;
  int first_parameter_;
  FeedForward<Act, Acc> ff1_;
  SelfAttention<Act, Acc> attn_;
  ConvModule<Act, Acc> conv_;
  FeedForward<Act, Acc> ff2_;
  LayerNorm<Act, Acc> norm_out_;
  int last_parameter_;
  ArenaSlot<Act> x1_, x2_, x3_, x4_, y_;
};

extern template class ConformerBlock<float, float>;
extern template class ConformerBlock<double, double>;

}  // namespace mpiasr
