// Convolutional ×4 subsampling in front of the Conformer blocks, channels-last:
//
//   features [B, T, M, 1]   (M = n_mels; float on the host)
//   a1 = ReLU(Conv2d_3x3/2(features))   [B, T1, F1, C]   T1 = (T - 1) / 2, F1 = (M - 1) / 2
//   a2 = ReLU(Conv2d_3x3/2(a1))         [B, T2, F2, C]   T2 = (T1 - 1) / 2, F2 = (F1 - 1) / 2
//   x  = a2 W^T + b, padded frames zeroed   [B, T2, d]   W [d, F2 * C], columns (f, c)
//
// Without padding, output frame t2 < L2 only sees input frames t < L, so the
// padding of a batch never reaches a valid frame. Parameters:
// conv.0 [C, 1, 3, 3], conv.2 [C, C, 3, 3] (PyTorch's Sequential numbering,
// ReLUs at 1 and 3) and out. The input gradient is not computed.
#pragma once

#include <functional>
#include <string>

#include "model/batch_shapes.h"
#include "model/layer_context.h"
#include "model/linear.h"

namespace mpiasr {

template <typename Act, typename Acc>
class ConvSubsampling {
 public:
  // da1_scratch: plan room for conv.0's output gradient, for a backend that
  // forms it whole (Backend::subsampling_da1_scratch).
  ConvSubsampling(ParameterStore<Act, Acc>& params, ActivationArena<Act, Acc>& arena,
                  const std::string& name, int n_mels, int channels, int d_model,
                  const BatchShapes& shapes, bool da1_scratch);

  // features: host float [B, input_frames, n_mels]; ctx describes the output
  // (ctx.frames = T2). Returns x [B, T2, d] in the arena.
  const Act* forward(LayerContext<Act, Acc>& ctx, const float* features, int input_frames) const;
  // dx = d loss / d x (masked in place at padding); accumulates the weight
  // gradients. parameters_ready(first, last), if given, is called as the
  // gradients of parameters [first, last) become final: out's, then conv.2's
  // (its weight gradient is taken before its input gradient, so the
  // all-reduce of out and conv.2 runs while conv.2's input gradient and
  // conv.0 are computed; conv.2 is most of the model's arithmetic at the
  // small sizes), then conv.0's. Together they cover every parameter once.
  void backward(LayerContext<Act, Acc>& ctx, Act* dx, int input_frames,
                const std::function<void(int, int)>& parameters_ready = {}) const;

 private:
  int n_mels_, channels_, d_model_;
  bool da1_scratch_;
  int conv0_weight_ = -1, conv0_bias_ = -1, conv2_weight_ = -1, conv2_bias_ = -1;
  Linear<Act, Acc> out_;
  ArenaSlot<Act> input_, a1_, a2_, output_, da1_, da2_;
};

extern template class ConvSubsampling<float, float>;
extern template class ConvSubsampling<double, double>;

}  // namespace mpiasr
