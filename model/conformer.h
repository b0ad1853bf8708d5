// The Conformer-CTC model: subsampling, N Conformer blocks, the CTC head.
//
//   features [B, T, n_mels] -> ConvSubsampling -> x [B, T2, d]
//   x -> block_0 -> ... -> block_{N-1} -> Linear d -> V -> log-softmax -> CTC loss
//
// Output lengths L2 = subsampled_frames(L); frames t >= L2 are padding and
// never influence valid frames, losses or gradients. The loss of utterance b
// is its CTC negative log-likelihood; the gradient written is
//   grad += loss_scale / loss_divisor * d (sum_b loss_b) / d theta
// The trainer passes loss_divisor 1 and divides the gradient summed over
// ranks and micro-batches by the global token count when it unscales it
// (src/trainer.h), which gives the gradient of the token-averaged loss.
//
// Parameters are registered in forward order (subsampling, blocks, head), so
// backward finishes them from the end of the flat buffer to its start: the
// head first, then block N-1 .. 0, then the subsampling. Every buffer is
// planned at construction for the batch shapes it will see (BatchShapes: the
// largest B x T, B x T2 among them, not the largest B times the largest T); a
// step never allocates on the backend, and its training form never waits for
// the device: the loss scale comes from and the losses go to backend memory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "model/activation_arena.h"
#include "model/batch_shapes.h"
#include "model/batch_view.h"
#include "model/conformer_block.h"
#include "model/layer_context.h"
#include "model/linear.h"
#include "model/parameters.h"
#include "model/presets.h"
#include "model/subsampling.h"

namespace mpiasr {

// How much of a forward's output is the blank (id 0), summed over the output
// frames of its utterances (padding left out).
struct BlankStatistics {
  double frames = 0;
  double posterior = 0;  // sum of p(blank | frame)
  double argmax = 0;     // frames whose most probable output is the blank
};

// Adds the first lengths[b] frames of each utterance b of log-probs
// [batch, frames, vocab] to `stats`. Ties between the blank and another
// output count as the blank.
void add_blank_statistics(BlankStatistics& stats, const float* logprobs, const int32_t* lengths,
                          int batch, int frames, int vocab);

// A part of the model and its tensors [first, last) in the parameter store.
struct ParameterGroup {
  std::string name;
  int first = 0, last = 0;
};

template <typename Act, typename Acc>
class Conformer {
 public:
  // Planned for every batch shape of `shapes` (model/batch_shapes.h).
  // parameter_multiple: the parameter buffers' length is a multiple of it
  // (ParameterStore; the sharded optimizer needs world size x the alignment).
  Conformer(Backend<Act, Acc>& backend, const ConformerConfig& config, const BatchShapes& shapes,
            uint64_t init_seed, size_t parameter_multiple = kParameterAlignment);
  // Planned for batches of up to max_batch utterances of up to max_frames frames.
  Conformer(Backend<Act, Acc>& backend, const ConformerConfig& config, int max_batch,
            int max_frames, uint64_t init_seed, size_t parameter_multiple = kParameterAlignment)
      : Conformer(backend, config, BatchShapes(max_batch, max_frames), init_seed,
                  parameter_multiple) {}

  ParameterStore<Act, Acc>& params() { return params_; }
  const ConformerConfig& config() const { return config_; }
  const BatchShapes& shapes() const { return shapes_; }
  size_t arena_bytes() const { return arena_.bytes(); }

  // Forward + backward on one batch; weight gradients ACCUMULATE into
  // params().grad. Each utterance's gradient is scaled by
  // *loss_scale / loss_divisor; loss_scale is one float in backend memory
  // (the StepControl's), null for 1. Infeasible utterances (fewer output
  // frames than the CTC alignment needs) get loss 0 and zero gradient if
  // zero_infinity, else the step throws an Error naming them. *loss_sum
  // (backend memory, may be null) += the feasible utterances' losses
  // (unscaled NLL), in order; nothing waits for the device.
  // dropout_seed must differ between steps (and ranks): dropout sites take
  // distinct counter ranges within a step. on_grads_ready(offset, count), if
  // set, is called once per layer in reverse layer order, as soon as the grad
  // elements [offset, offset + count) of the flat buffer are final.
  void forward_backward(const BatchView& batch, double loss_divisor, const float* loss_scale,
                        bool zero_infinity, uint64_t dropout_seed, double* loss_sum,
                        const std::function<void(size_t, size_t)>& on_grads_ready = {});
  // The same with a host loss scale, returning the per-utterance losses
  // (infeasible ones 0): waits for the device.
  std::vector<double> forward_backward(
      const BatchView& batch, double loss_divisor, float loss_scale, bool zero_infinity,
      uint64_t dropout_seed, const std::function<void(size_t, size_t)>& on_grads_ready = {});

  // Inference (no dropout): log-probs [B, T2, V] as host floats (or doubles)
  // and the output lengths L2 [B].
  void infer(const BatchView& batch, std::vector<float>& logprobs,
             std::vector<int32_t>& out_lengths);
  void infer(const BatchView& batch, std::vector<double>& logprobs,
             std::vector<int32_t>& out_lengths);
  // Backward after an infer, for an objective of its outputs: weight
  // gradients ACCUMULATE into params().grad as the chain rule gives them from
  // dlogits, the objective's gradient with respect to the logits (host,
  // [B, T2, V] of that infer; padding frames must be 0). The batch the infer
  // read must still be alive. Test-time adaptation uses it
  // (src/test_time_adaptation.h).
  void backward_from_logits(const double* dlogits);

  int output_frames(int input_frames) const { return subsampled_frames(input_frames); }

  // Adds the last forward's (training or inference) to `stats`: copies its
  // log-probs to the host, a wait for the device.
  void add_blank_statistics(BlankStatistics& stats);
  // The subsampling ("encoder.subsampling"), each block ("encoder.layers.i")
  // and the head ("ctc_head"), in registration order; together they hold
  // every tensor.
  std::vector<ParameterGroup> parameter_groups() const;

 private:
  // Checks the batch against the model and fills the host length arrays;
  // returns T2.
  int prepare(const BatchView& batch);
  LayerContext<Act, Acc> context(int batch_size, int frames, float dropout, uint64_t seed);
  // Runs subsampling, blocks and head; leaves the logits in the arena and
  // returns the encoder output (the head's input).
  const Act* forward(LayerContext<Act, Acc>& ctx, const BatchView& batch);
  // The backward of the last forward from the logits' gradient in dlogits_:
  // head, blocks, subsampling, each layer's range handed to on_grads_ready.
  void backward(LayerContext<Act, Acc>& ctx, const Act* encoded, int input_frames,
                const std::function<void(size_t, size_t)>& on_grads_ready);
  template <typename Host>
  void infer_to_host(const BatchView& batch, std::vector<Host>& logprobs,
                     std::vector<int32_t>& out_lengths);

  Backend<Act, Acc>& backend_;
  ConformerConfig config_;
  BatchShapes shapes_;
  ParameterStore<Act, Acc> params_;
  ActivationArena<Act, Acc> arena_;
  Workspace<Act> workspace_;
  ConvSubsampling<Act, Acc> subsampling_;
  std::vector<ConformerBlock<Act, Acc>> blocks_;
  Linear<Act, Acc> head_;
  ArenaSlot<Act> logits_, dlogits_, grad_a_, grad_b_;
  ArenaSlot<Acc> logprobs_;
  ArenaSlot<double> losses_;     // per utterance, of the last forward_backward
  ArenaSlot<float> loss_scale_;  // the host loss scale of the waiting form
  std::vector<int32_t> out_lengths_;
  std::vector<double> grad_scale_;
  std::vector<int> infeasible_;           // of the last forward_backward
  std::vector<const Act*> block_inputs_;  // x0 of each block in the last forward
  int last_batch_ = 0, last_frames_ = 0;  // B and T2 of the last forward
  int last_input_frames_ = 0;             // T of the last forward
  const Act* last_encoded_ = nullptr;     // the head's input in the last forward
};

extern template class Conformer<float, float>;
extern template class Conformer<double, double>;

}  // namespace mpiasr
