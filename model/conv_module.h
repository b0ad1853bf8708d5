// The Conformer convolution module, pre-norm, rows = B * T:
//
//   g   = GLU(LN(x) W1^T + b1)                  W1 [2d, d]; GLU(a, b) = a sigmoid(b)
//   c   = DepthwiseConv1d(g) masked at padding   weight [d, 1, K], "same" padding
//   s   = Swish(LN2(c))
//   out = x + Dropout(s W2^T + b2)              W2 [d, d]
//
// Frames t >= L_b are zeros on the depthwise input and output, so padding
// never reaches a valid frame. LN2 and Swish run as one op; the residual sum
// is left pending for the next sub-layer's LayerNorm to add
// (PendingResidual), as the sum before it is added by this one's. Saved for
// backward: LN(x) [rows, d], the pointwise output [rows, 2d], g, c, LN2(c)
// and s [rows, d].
#pragma once

#include <string>

#include "model/layer_context.h"
#include "model/layer_norm.h"
#include "model/linear.h"

namespace mpiasr {

template <typename Act, typename Acc>
class ConvModule {
 public:
  ConvModule(ParameterStore<Act, Acc>& params, ActivationArena<Act, Acc>& arena,
             const std::string& name, int d_model, int kernel, size_t max_rows, float eps);

  // x_in = the sum `in` (written to x when it has a branch; x [B, T, d]);
  // returns the pending x_in + Dropout(Conv(x_in)).
  PendingResidual<Act> forward(LayerContext<Act, Acc>& ctx, Act* x,
                               const PendingResidual<Act>& in) const;
  // dx: on entry d loss / d x_out, on exit d loss / d x_in (updated in place).
  void backward(LayerContext<Act, Acc>& ctx, Act* dx, const Act* x_in) const;

 private:
  int d_model_, kernel_;
  LayerNorm<Act, Acc> norm_;
  Linear<Act, Acc> pointwise1_;
  int depthwise_weight_ = -1, depthwise_bias_ = -1;
  LayerNorm<Act, Acc> conv_norm_;
  Linear<Act, Acc> pointwise2_;
  ArenaSlot<Act> normed_, pointwise_, conv_, conv_normed_, swished_;
};

extern template class ConvModule<float, float>;
extern template class ConvModule<double, double>;

}  // namespace mpiasr
