// The backend interface: every operation the model runs, on raw buffers that
// live where the backend computes (host memory for the CPU backend, device
// memory for the CUDA backend). model/ calls only this interface and never
// branches on which backend is behind it.
//
// Types:
//   Act  — activations and the compute copy of the weights
//          (float or double on the CPU, __half on CUDA)
//   Acc  — master weights, weight gradients, optimizer state, statistics
//          (float or double on the CPU, float on CUDA)
//
// Layout conventions (row-major, last index fastest):
//   sequences       [B, T, C]           B utterances, T frames (padded), C channels
//   linear weight   [N, K]              out[m, n] = sum_k in[m, k] * W[n, k] + b[n]  (PyTorch)
//   fused QKV       [B, T, 3, H, Dh]    q, k, v of each frame, H heads of Dh each
//   lengths         int32 [B] in host memory: valid frames per utterance
//
// Backward conventions: gradients of inputs (d<input>) are overwritten, except
// where a comment says "+=". Weight and bias gradients (Acc) are always
// accumulated (+=), so gradient accumulation over micro-batches is free.
// A null gradient pointer means "not needed".
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "kernels/step_control.h"

namespace mpiasr {

// How often queue_as_graph captured a graph and replayed one.
struct StepGraphCounts {
  uint64_t captures = 0;
  uint64_t replays = 0;
};

template <typename Act, typename Acc>
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

  // ---- step graphs ----------------------------------------------------------
  // Queues what `queue` queues. CUDA: as a CUDA graph, one per distinct piece
  // of work, captured the first time and replayed after (DESIGN.md "Step
  // graphs"); `queue` then runs two or three times on the host, must queue
  // the same work each time given the same host arguments, and may neither
  // read back nor use to_device. Elsewhere: queue().
  virtual void queue_as_graph(const std::function<void()>& queue) { queue(); }
  virtual StepGraphCounts step_graph_counts() const { return {}; }

  // ---- memory (bytes; aligned to 256) -------------------------------------
  virtual void* alloc(size_t bytes) = 0;
  virtual void release(void* ptr) = 0;
  // Copies host data for the work queued after it; host_src may be reused as
  // soon as the call returns, which does not wait for the device.
  virtual void to_device(void* dst, const void* host_src, size_t bytes) = 0;
  // Waits for the work queued so far and copies its result to the host.
  virtual void to_host(void* host_dst, const void* src, size_t bytes) = 0;
  // The input features of the next forward, host floats [n], where the
  // backend computes them; valid until the second call after this one (CUDA
  // double-buffers them and copies on a stream of their own, so the copy of
  // the next batch overlaps the work on this one).
  virtual const float* upload_input(const float* host_src, size_t n) = 0;
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;
  virtual void zero(void* ptr, size_t bytes) = 0;
  virtual void synchronize() = 0;

  // ---- casts and elementwise ----------------------------------------------
  virtual void cast_acc_to_act(Act* dst, const Acc* src, size_t n) = 0;
  virtual void cast_act_to_acc(Acc* dst, const Act* src, size_t n) = 0;
  virtual void cast_f32_to_act(Act* dst, const float* src, size_t n) = 0;  // input features
  // zero the rows t >= lengths[b] of x [B, T, C]
  virtual void mask_padding(Act* x, const int32_t* lengths, int B, int T, int C) = 0;

  // ---- linear -------------------------------------------------------------
  // out[M, N] = inp[M, K] W[N, K]^T + bias[N]   (bias may be null)
  virtual void linear_forward(Act* out, const Act* inp, const Act* weight, const Act* bias, int M,
                              int K, int N) = 0;
  // dinp = dout W; dweight += dout^T inp; dbias += sum_m dout
  virtual void linear_backward(Act* dinp, Acc* dweight, Acc* dbias, const Act* dout, const Act* inp,
                               const Act* weight, int M, int K, int N) = 0;

  // ---- convolution subsampling --------------------------------------------
  // 3x3 stride-2 Conv2d, no padding, channels-last layout: inp [B, H, W, Cin]
  // -> out [B, Ho, Wo, Cout], Ho = (H - 3) / 2 + 1, Wo = (W - 3) / 2 + 1, so
  // the output is already [B, T', F' * Cout] for the linear that follows.
  // weight [Cout, Cin, 3, 3] (PyTorch's layout), bias [Cout]. H is time, W frequency.
  // With relu the output is max(conv + bias, 0).
  virtual void conv2d_forward(Act* out, const Act* inp, const Act* weight, const Act* bias, int B,
                              int Cin, int H, int W, int Cout, bool relu) = 0;
  virtual void conv2d_backward(Act* dinp, Acc* dweight, Acc* dbias, const Act* dout, const Act* inp,
                               const Act* weight, int B, int Cin, int H, int W, int Cout) = 0;
  // The first of two stacked convolutions, a1 = relu(conv2d(x, W0, b0)) with
  // x [B, H, W, 1] and a1 [B, H1, W1, C], then a2 = conv2d(a1, W2, b2): given
  // a2's gradient dout2, dweight0 += and dbias0 += the gradients of W0 and b0
  // through W2 and the ReLU (da1 = [a1 > 0] conv2d_backward_input(dout2, W2)).
  // da1_scratch [B, H1, W1, C] is room for da1 where a backend forms it whole
  // (subsampling_da1_scratch(); the CPU backend does not and takes null:
  // kernels/cpu/conv2d.h).
  virtual void subsampling_first_conv_backward(Acc* dweight0, Acc* dbias0, const Act* dout2,
                                               const Act* a1, const Act* x, const Act* weight2,
                                               int B, int H, int W, int C, Act* da1_scratch) = 0;
  // Whether subsampling_first_conv_backward needs its da1_scratch, which the
  // model then plans in its activation memory.
  virtual bool subsampling_da1_scratch() const = 0;

  // ---- normalization ------------------------------------------------------
  // LayerNorm over the last dimension C of x [N, C]; mean and rstd [N] saved.
  virtual void layernorm_forward(Act* out, Acc* mean, Acc* rstd, const Act* inp, const Act* weight,
                                 const Act* bias, int N, int C, float eps) = 0;
  // A residual sum and the LayerNorm of it in one pass (the end of one
  // sub-layer and the start of the next):
  //   x = base + scale * Dropout(branch)     (x [N, C] written, for backward)
  //   out, mean, rstd = layernorm_forward(x)
  // Dropout as in the dropout section (site seed, offset; p = 0: none). x
  // aliases neither base nor branch.
  virtual void residual_layernorm_forward(Act* x, Act* out, Acc* mean, Acc* rstd, const Act* base,
                                          const Act* branch, float scale, float p, uint64_t seed,
                                          uint64_t offset, const Act* weight, const Act* bias,
                                          int N, int C, float eps) = 0;
  // LayerNorm then Swish: normed = layernorm_forward(inp) (kept for backward),
  // out = swish(normed).
  virtual void layernorm_swish_forward(Act* normed, Act* out, Acc* mean, Acc* rstd, const Act* inp,
                                       const Act* weight, const Act* bias, int N, int C,
                                       float eps) = 0;
  // dinp += (accumulate) or = (otherwise) LayerNorm's input gradient from dout
  // = d loss / d out; dweight, dbias +=.
  virtual void layernorm_backward(Act* dinp, Acc* dweight, Acc* dbias, const Act* dout,
                                  const Act* inp, const Act* weight, const Acc* mean,
                                  const Acc* rstd, int N, int C, bool accumulate) = 0;
  // The backward pass of layernorm_swish_forward from dout = d loss / d out
  // (normed its first output): dinp overwritten; dweight, dbias +=.
  virtual void layernorm_swish_backward(Act* dinp, Acc* dweight, Acc* dbias, const Act* dout,
                                        const Act* inp, const Act* normed, const Act* weight,
                                        const Acc* mean, const Acc* rstd, int N, int C) = 0;

  // ---- activations (elementwise over n) -----------------------------------
  // dinp = relu'(inp) dout; inp may be relu's output (relu(z) > 0 exactly when z > 0).
  virtual void relu_backward(Act* dinp, const Act* dout, const Act* inp, size_t n) = 0;
  // out = Dropout(swish(inp)), dropout as in the dropout section.
  virtual void swish_dropout_forward(Act* out, const Act* inp, float p, uint64_t seed,
                                     uint64_t offset, size_t n) = 0;
  // dinp = swish'(inp) Dropout(dout), the same mask.
  virtual void swish_dropout_backward(Act* dinp, const Act* dout, const Act* inp, float p,
                                      uint64_t seed, uint64_t offset, size_t n) = 0;

  // ---- dropout (counter-based Philox; mask depends on seed, offset, index) --
  // Dropout(x)[i] = keep(seed, offset + i) ? x[i] / (1 - p) : 0, keep =
  // dropout_keep of kernels/philox.h, so every backend draws the same mask bit
  // for bit; p = 0 keeps everything. Applied inside the ops above; here the
  // gradient of a residual branch, x = base + scale * Dropout(branch):
  //   dbranch = scale * Dropout(dx)
  virtual void residual_dropout_backward(Act* dbranch, const Act* dx, float scale, float p,
                                         uint64_t seed, uint64_t offset, size_t n) = 0;

  // ---- attention ----------------------------------------------------------
  // Multi-head self-attention straight from the QKV projection qkv
  // [B, T, 3, H, Dh] (per frame q, k, v, each H heads of Dh), per utterance b
  // and head h, with q and k rotated by RoPE (kernels/rope.h, position = frame
  // index) and the keys s >= lengths[b] masked out:
  //   S = scale q k^T,  P = softmax over keys,  out [B, T, H, Dh] (= [B, T, C]) = P v
  // lse [B, H, T] gets each row's log-sum-exp of S for the backward pass
  // (-inf, and out 0, where lengths[b] = 0). Rows of padded queries are
  // computed as well. No T x T tensor is kept.
  virtual void attention_forward(Act* out, Acc* lse, const Act* qkv, const int32_t* lengths, int B,
                                 int T, int H, int Dh, float scale) = 0;
  // dqkv [B, T, 3, H, Dh] (overwritten) from dout = d loss / d out, P
  // recomputed from qkv and lse; out is the forward's output.
  virtual void attention_backward(Act* dqkv, const Act* dout, const Act* out, const Acc* lse,
                                  const Act* qkv, const int32_t* lengths, int B, int T, int H,
                                  int Dh, float scale) = 0;

  // ---- GLU, then depthwise Conv1d over time ("same" padding, masked) ------
  // The conv module's middle in one op: g = GLU(inp) over the last dimension
  // (inp [B, T, 2C], value half first: g = a sigmoid(b), a = inp[..., :C],
  // b = inp[..., C:]), then out [B, T, C] = the depthwise convolution of g
  // with weight [C, K] (K odd) and bias [C]. Frames t >= lengths[b] of g are
  // treated as zeros and written as zeros in out. No [B, T, C] g is kept.
  virtual void glu_depthwise_conv1d_forward(Act* out, const Act* inp, const Act* weight,
                                            const Act* bias, const int32_t* lengths, int B, int T,
                                            int C, int K) = 0;
  // dinp [B, T, 2C] (overwritten; 0 at padded frames) from dout = d loss / d
  // out, g recomputed from inp; dweight, dbias +=.
  virtual void glu_depthwise_conv1d_backward(Act* dinp, Acc* dweight, Acc* dbias, const Act* dout,
                                             const Act* inp, const Act* weight,
                                             const int32_t* lengths, int B, int T, int C,
                                             int K) = 0;

  // ---- output head and loss -----------------------------------------------
  // log-softmax over V of logits [N, V], result in Acc precision.
  virtual void log_softmax_forward(Acc* logprobs, const Act* logits, int N, int V) = 0;
  // CTC loss (blank = 0) from logprobs [B, T, V]; targets concatenated (host,
  // int32), target_lengths and input_lengths [B] (host). losses [B] (where
  // the backend computes) get the negative log-likelihood per utterance (+inf
  // if infeasible). dlogits [B, T, V] = grad_scale[b] * loss_scale * d loss_b /
  // d logits (through the log-softmax), zero at padded frames; grad_scale [B]
  // (host) lets the caller zero infeasible utterances, loss_scale (one float
  // where the backend computes, the StepControl's; null: 1) is the dynamic
  // loss scale. loss_sum (where the backend computes; may be null) += losses[b]
  // of the utterances with grad_scale[b] != 0 (all when grad_scale is null),
  // in utterance order.
  virtual void ctc_loss(double* losses, Act* dlogits, const Acc* logprobs, const int32_t* targets,
                        const int32_t* target_lengths, const int32_t* input_lengths,
                        const double* grad_scale, const float* loss_scale, double* loss_sum, int B,
                        int T, int V) = 0;

  // ---- optimizer (kernels/step_control.h) ----------------------------------
  // *sum += sum of squares of g [n], in double; sum where the backend computes.
  virtual void add_sum_squares(double* sum, const Acc* g, size_t n) = 0;
  // decide_step on *control (where the backend computes).
  virtual void decide_step(StepControl* control, const StepRule& rule) = 0;
  // AdamW (decoupled weight decay, bias-corrected; kernels/adamw_math.h) with
  // the coefficients of the step *control decided, on every element of every
  // segment (segments [segment_count] where the backend computes, by
  // increasing state_offset; their moments lie in [0, state_elements) of m
  // and v), in one pass (one kernel on CUDA):
  //   g' = g * grad_scale ; m = b1 m + (1-b1) g' ; v = b2 v + (1-b2) g'^2
  //   w -= lr * (m / (1-b1^t) / (sqrt(v / (1-b2^t)) + eps) + weight_decay * w)
  // then the compute copy w_act = (Act) w (skipped when w_act is null).
  // Nothing changes when the control skipped the step.
  virtual void adamw_step(Acc* w, Act* w_act, const Acc* g, Acc* m, Acc* v,
                          const AdamWSegment* segments, int segment_count, size_t state_elements,
                          const AdamWHyper& hyper, const StepControl* control) = 0;
};

}  // namespace mpiasr
