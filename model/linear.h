// A Linear layer (PyTorch's nn.Linear) registered in the parameter store:
//   out[m, n] = sum_k inp[m, k] W[n, k] + b[n]      W [out, in], b [out]
// Backward: dinp = dout W (overwritten); dW += dout^T inp; db += sum_m dout.
#pragma once

#include <string>

#include "model/layer_context.h"

namespace mpiasr {

template <typename Act, typename Acc>
class Linear {
 public:
  Linear() = default;
  Linear(ParameterStore<Act, Acc>& params, const std::string& name, int in, int out)
      : in_(in), out_(out) {
    weight_ = params.add(name + ".weight", {out, in}, ParameterKind::kWeight, in);
    bias_ = params.add(name + ".bias", {out}, ParameterKind::kBias, in);
  }

  void forward(LayerContext<Act, Acc>& ctx, Act* out, const Act* inp, int rows) const {
    ctx.backend.linear_forward(out, inp, ctx.params.weight(weight_), ctx.params.weight(bias_), rows,
                               in_, out_);
  }
  // dinp may be null (not needed).
  void backward(LayerContext<Act, Acc>& ctx, Act* dinp, const Act* dout, const Act* inp,
                int rows) const {
    ctx.backend.linear_backward(dinp, ctx.params.grad(weight_), ctx.params.grad(bias_), dout, inp,
                                ctx.params.weight(weight_), rows, in_, out_);
  }

  int weight_index() const { return weight_; }
  int bias_index() const { return bias_; }
  int in() const { return in_; }
  int out() const { return out_; }

 private:
  int weight_ = -1, bias_ = -1;
  int in_ = 0, out_ = 0;
};

}  // namespace mpiasr
