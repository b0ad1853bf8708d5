// Definitions of ConformerBlock (model/conformer_block.h), included by the
// translation units that instantiate it for their <Act, Acc>.
#pragma once

#include "model/attention_impl.h"
#include "model/conformer_block.h"
#include "model/conv_module_impl.h"
#include "model/feed_forward_impl.h"
#include "model/presets.h"

namespace mpiasr {

template <typename Act, typename Acc>
ConformerBlock<Act, Acc>::ConformerBlock(ParameterStore<Act, Acc>& params,
                                         ActivationArena<Act, Acc>& arena, const std::string& name,
                                         const ConformerConfig& config, size_t max_rows)
    : d_model_(config.d_model),
      first_parameter_(int(params.infos().size())),
      ff1_(params, arena, name + ".ff1", config.d_model, config.ff_mult * config.d_model, max_rows,
           config.layernorm_eps),
      attn_(params, arena, name + ".attn", config.d_model, config.n_heads, max_rows,
            config.layernorm_eps),
      conv_(params, arena, name + ".conv", config.d_model, config.conv_kernel, max_rows,
            config.layernorm_eps),
      ff2_(params, arena, name + ".ff2", config.d_model, config.ff_mult * config.d_model, max_rows,
           config.layernorm_eps),
      norm_out_(params, arena, name + ".norm_out", config.d_model, max_rows, config.layernorm_eps),
      last_parameter_(int(params.infos().size())) {
  const size_t rows_d = max_rows * config.d_model;
  for (ArenaSlot<Act>* slot : {&x1_, &x2_, &x3_, &x4_, &y_}) {
    *slot = arena.template reserve<Act>(rows_d);
  }
}

template <typename Act, typename Acc>
const Act* ConformerBlock<Act, Acc>::forward(LayerContext<Act, Acc>& ctx, const Act* x0) const {
  Act* y = ctx.arena.get(y_);
  PendingResidual<Act> sum{x0};
  sum = ff1_.forward(ctx, nullptr, sum);  // x0 is whole: nothing to write
  sum = attn_.forward(ctx, ctx.arena.get(x1_), sum);
  sum = conv_.forward(ctx, ctx.arena.get(x2_), sum);
  sum = ff2_.forward(ctx, ctx.arena.get(x3_), sum);
  norm_out_.forward_residual(ctx, ctx.arena.get(x4_), y, sum);
  return y;
}

template <typename Act, typename Acc>
void ConformerBlock<Act, Acc>::backward(LayerContext<Act, Acc>& ctx, const Act* x0,
                                        const Act* d_out, Act* d_in) const {
  norm_out_.backward(ctx, d_in, d_out, ctx.arena.get(x4_), false);
  ff2_.backward(ctx, d_in, ctx.arena.get(x3_));
  conv_.backward(ctx, d_in, ctx.arena.get(x2_));
  attn_.backward(ctx, d_in, ctx.arena.get(x1_));
  ff1_.backward(ctx, d_in, x0);
}

}  // namespace mpiasr
