// LayerNorm over the last dimension C of x [rows, C] (PyTorch's nn.LayerNorm):
//   out = (x - mean) * rstd * weight + bias,   rstd = 1 / sqrt(var + eps)
// with the per-row mean and rstd [rows] (Acc) saved in the arena for backward.
// Backward ACCUMULATES into dinp (its input is always a residual stream or a
// buffer the caller zeroed).
#pragma once

#include <string>

#include "model/layer_context.h"

namespace mpiasr {

template <typename Act, typename Acc>
class LayerNorm {
 public:
  LayerNorm() = default;
  LayerNorm(ParameterStore<Act, Acc>& params, ActivationArena<Act, Acc>& arena,
            const std::string& name, int dim, size_t max_rows, float eps)
      : dim_(dim), eps_(eps) {
    weight_ = params.add(name + ".weight", {dim}, ParameterKind::kNormWeight, 0);
    bias_ = params.add(name + ".bias", {dim}, ParameterKind::kNormBias, 0);
    mean_ = arena.template reserve<Acc>(max_rows);
    rstd_ = arena.template reserve<Acc>(max_rows);
  }

  void forward(LayerContext<Act, Acc>& ctx, Act* out, const Act* inp) const {
    ctx.backend.layernorm_forward(out, ctx.arena.get(mean_), ctx.arena.get(rstd_), inp,
                                  ctx.params.weight(weight_), ctx.params.weight(bias_), ctx.rows(),
                                  dim_, eps_);
  }
  void backward(LayerContext<Act, Acc>& ctx, Act* dinp, const Act* dout, const Act* inp) const {
    ctx.backend.layernorm_backward(dinp, ctx.params.grad(weight_), ctx.params.grad(bias_), dout,
                                   inp, ctx.params.weight(weight_), ctx.arena.get(mean_),
                                   ctx.arena.get(rstd_), ctx.rows(), dim_);
  }

  int weight_index() const { return weight_; }

 private:
  int weight_ = -1, bias_ = -1;
  int dim_ = 0;
  float eps_ = 1e-5f;
  ArenaSlot<Acc> mean_, rstd_;
};

}  // namespace mpiasr
