// LayerNorm over the last dimension C of x [rows, C] (PyTorch's nn.LayerNorm):
//   out = (x - mean) * rstd * weight + bias,   rstd = 1 / sqrt(var + eps)
// with the per-row mean and rstd [rows] (Acc) saved in the arena for backward.
// forward_residual first adds a sub-layer's pending residual sum into x, in the
// same pass. Backward accumulates into dinp (its input is a residual stream)
// unless told to write it.
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
  // out = LN(x) for x the sum `in` describes, which is written to `x` when it
  // has a branch (x then is the input of backward; without a branch it is
  // in.base). Returns the input of backward.
  const Act* forward_residual(LayerContext<Act, Acc>& ctx, Act* x, Act* out,
                              const PendingResidual<Act>& in) const {
    if (!in.branch) {
      forward(ctx, out, in.base);
      return in.base;
    }
    ctx.backend.residual_layernorm_forward(
        x, out, ctx.arena.get(mean_), ctx.arena.get(rstd_), in.base, in.branch, in.scale,
        ctx.dropout, ctx.dropout_seed, in.dropout_offset, ctx.params.weight(weight_),
        ctx.params.weight(bias_), ctx.rows(), dim_, eps_);
    return x;
  }
  // dinp += (accumulate) or = d loss / d inp from dout = d loss / d out.
  void backward(LayerContext<Act, Acc>& ctx, Act* dinp, const Act* dout, const Act* inp,
                bool accumulate = true) const {
    ctx.backend.layernorm_backward(dinp, ctx.params.grad(weight_), ctx.params.grad(bias_), dout,
                                   inp, ctx.params.weight(weight_), ctx.arena.get(mean_),
                                   ctx.arena.get(rstd_), ctx.rows(), dim_, accumulate);
  }
  // LayerNorm then Swish: normed = LN(inp) (kept for backward), out = swish(normed).
  void forward_swish(LayerContext<Act, Acc>& ctx, Act* normed, Act* out, const Act* inp) const {
    ctx.backend.layernorm_swish_forward(normed, out, ctx.arena.get(mean_), ctx.arena.get(rstd_),
                                        inp, ctx.params.weight(weight_), ctx.params.weight(bias_),
                                        ctx.rows(), dim_, eps_);
  }
  // The backward pass of forward_swish from dout = d loss / d out; dinp written.
  void backward_swish(LayerContext<Act, Acc>& ctx, Act* dinp, const Act* dout, const Act* inp,
                      const Act* normed) const {
    ctx.backend.layernorm_swish_backward(
        dinp, ctx.params.grad(weight_), ctx.params.grad(bias_), dout, inp, normed,
        ctx.params.weight(weight_), ctx.arena.get(mean_), ctx.arena.get(rstd_), ctx.rows(), dim_);
  }

  int weight_index() const { return weight_; }

 private:
  int weight_ = -1, bias_ = -1;
  int dim_ = 0;
  float eps_ = 1e-5f;
  ArenaSlot<Acc> mean_, rstd_;
};

}  // namespace mpiasr
