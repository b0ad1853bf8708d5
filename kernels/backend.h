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
//   attention heads [B, H, T, Dh]
//   lengths         int32 [B] in host memory: valid frames per utterance
//
// Backward conventions: gradients of inputs (d<input>) are overwritten, except
// where a comment says "+=". Weight and bias gradients (Acc) are always
// accumulated (+=), so gradient accumulation over micro-batches is free.
// A null gradient pointer means "not needed".
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "kernels/step_control.h"

namespace mpiasr {

template <typename Act, typename Acc>
class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;

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
  // y = x + alpha * r   (residual connections; y may alias x)
  virtual void add_scaled(Act* y, const Act* x, const Act* r, float alpha, size_t n) = 0;
  // dy += alpha * dx    (gradient flowing into a residual branch's input)
  virtual void accumulate_scaled(Act* dy, const Act* dx, float alpha, size_t n) = 0;
  // zero the rows t >= lengths[b] of x [B, T, C]
  virtual void mask_padding(Act* x, const int32_t* lengths, int B, int T, int C) = 0;

  // ---- GEMM ---------------------------------------------------------------
  // C[b] = alpha * op(A[b]) op(B[b]) + beta * C[b] for b in [0, batch);
  // row-major, op(X) = X or X^T, C[b] is M x N, K the inner dimension.
  virtual void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const Act* A,
                    int lda, int64_t stride_a, const Act* B, int ldb, int64_t stride_b, float beta,
                    Act* C, int ldc, int64_t stride_c, int batch) = 0;
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
  virtual void conv2d_forward(Act* out, const Act* inp, const Act* weight, const Act* bias, int B,
                              int Cin, int H, int W, int Cout) = 0;
  virtual void conv2d_backward(Act* dinp, Acc* dweight, Acc* dbias, const Act* dout, const Act* inp,
                               const Act* weight, int B, int Cin, int H, int W, int Cout) = 0;

  // ---- normalization ------------------------------------------------------
  // LayerNorm over the last dimension C of x [N, C]; mean and rstd [N] saved.
  virtual void layernorm_forward(Act* out, Acc* mean, Acc* rstd, const Act* inp, const Act* weight,
                                 const Act* bias, int N, int C, float eps) = 0;
  // dinp += ... (accumulates, as the LN input is always a residual stream)
  virtual void layernorm_backward(Act* dinp, Acc* dweight, Acc* dbias, const Act* dout,
                                  const Act* inp, const Act* weight, const Acc* mean,
                                  const Acc* rstd, int N, int C) = 0;

  // ---- activations (elementwise over n) -----------------------------------
  virtual void relu_forward(Act* out, const Act* inp, size_t n) = 0;
  virtual void relu_backward(Act* dinp, const Act* dout, const Act* inp, size_t n) = 0;
  virtual void swish_forward(Act* out, const Act* inp, size_t n) = 0;
  virtual void swish_backward(Act* dinp, const Act* dout, const Act* inp, size_t n) = 0;
  // GLU over the last dimension: inp [N, 2C] -> out [N, C], out = a * sigmoid(b)
  virtual void glu_forward(Act* out, const Act* inp, int N, int C) = 0;
  virtual void glu_backward(Act* dinp, const Act* dout, const Act* inp, int N, int C) = 0;

  // ---- dropout (counter-based Philox; mask depends on seed, offset, index) --
  // out[i] = keep(seed, offset + i) ? inp[i] / (1 - p) : 0, keep = dropout_keep
  // of kernels/philox.h, so every backend draws the same mask bit for bit.
  virtual void dropout_forward(Act* out, const Act* inp, float p, uint64_t seed, uint64_t offset,
                               size_t n) = 0;
  virtual void dropout_backward(Act* dinp, const Act* dout, float p, uint64_t seed, uint64_t offset,
                                size_t n) = 0;

  // ---- attention pieces ---------------------------------------------------
  // Split the fused projection qkv [B, T, 3, H, Dh] into q, k, v [B, H, T, Dh],
  // applying rotary position embedding (rotate-half form, base 10000, position =
  // frame index; kernels/rope.h) to q and k.
  virtual void qkv_split_rope_forward(Act* q, Act* k, Act* v, const Act* qkv, int B, int T, int H,
                                      int Dh) = 0;
  virtual void qkv_split_rope_backward(Act* dqkv, const Act* dq, const Act* dk, const Act* dv,
                                       int B, int T, int H, int Dh) = 0;
  // Softmax over the last dimension of scores [B, H, T, T] with keys s >= lengths[b]
  // masked out (probability 0); rows of padded queries are computed as well.
  virtual void masked_softmax_forward(Act* probs, const Act* scores, const int32_t* lengths, int B,
                                      int H, int T) = 0;
  virtual void masked_softmax_backward(Act* dscores, const Act* dprobs, const Act* probs, int B,
                                       int H, int T) = 0;
  // ctx [B, H, T, Dh] -> [B, T, H, Dh] (= [B, T, C]) and back.
  virtual void merge_heads_forward(Act* out, const Act* ctx, int B, int T, int H, int Dh) = 0;
  virtual void merge_heads_backward(Act* dctx, const Act* dout, int B, int T, int H, int Dh) = 0;

  // ---- depthwise Conv1d over time, "same" padding, masked at padding ------
  // inp, out [B, T, C]; weight [C, K] (K odd); bias [C]. Frames t >= lengths[b]
  // are treated as zeros on input and written as zeros on output.
  virtual void depthwise_conv1d_forward(Act* out, const Act* inp, const Act* weight,
                                        const Act* bias, const int32_t* lengths, int B, int T,
                                        int C, int K) = 0;
  virtual void depthwise_conv1d_backward(Act* dinp, Acc* dweight, Acc* dbias, const Act* dout,
                                         const Act* inp, const Act* weight, const int32_t* lengths,
                                         int B, int T, int C, int K) = 0;

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
