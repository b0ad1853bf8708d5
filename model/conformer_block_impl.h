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
                                         const ConformerConfig& config, size_t max_rows,
                                         size_t max_score_rows)
    : d_model_(config.d_model),
      first_parameter_(int(params.infos().size())),
      ff1_(params, arena, name + ".ff1", config.d_model, config.ff_mult * config.d_model, max_rows,
           config.layernorm_eps),
      attn_(params, arena, name + ".attn", config.d_model, config.n_heads, max_rows, max_score_rows,
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
  Act* x1 = ctx.arena.get(x1_);
  Act* x2 = ctx.arena.get(x2_);
  Act* x3 = ctx.arena.get(x3_);
  Act* x4 = ctx.arena.get(x4_);
  Act* y = ctx.arena.get(y_);
  ff1_.forward(ctx, x1, x0);
  attn_.forward(ctx, x2, x1);
  conv_.forward(ctx, x3, x2);
  ff2_.forward(ctx, x4, x3);
  norm_out_.forward(ctx, y, x4);
  return y;
}

template <typename Act, typename Acc>
void ConformerBlock<Act, Acc>::backward(LayerContext<Act, Acc>& ctx, const Act* x0,
                                        const Act* d_out, Act* d_in) const {
  ctx.backend.zero(d_in, size_t(ctx.rows()) * d_model_ * sizeof(Act));
  norm_out_.backward(ctx, d_in, d_out, ctx.arena.get(x4_));
  ff2_.backward(ctx, d_in, ctx.arena.get(x3_));
  conv_.backward(ctx, d_in, ctx.arena.get(x2_));
  attn_.backward(ctx, d_in, ctx.arena.get(x1_));
  ff1_.backward(ctx, d_in, x0);
}

}  // namespace mpiasr
