// The CPU backend: kernels/backend.h on host memory, in one precision T for
// activations and accumulations alike (float for training, double for
// gradient checks). Each method forwards to the op family's file in
// kernels/cpu/.
//
// Threading: every operation runs on an OpenMP team of num_threads threads
// (0 = all cores of the process's affinity mask). OpenBLAS is kept at one
// thread and called from inside those teams (kernels/cpu/gemm.h), so only one
// thread pool ever runs and nothing is oversubscribed. The thread count is
// applied at the start of every call, so backends with different counts can
// coexist in one process (one at a time per calling thread).
#pragma once

#include <string>

#include "kernels/backend.h"

namespace mpiasr {

template <typename T>
class CpuBackend : public Backend<T, T> {
 public:
  explicit CpuBackend(int num_threads = 0);
  int num_threads() const { return threads_; }

  std::string name() const override;

  void* alloc(size_t bytes) override;
  void release(void* ptr) override;
  void to_device(void* dst, const void* host_src, size_t bytes) override;
  void to_host(void* host_dst, const void* src, size_t bytes) override;
  // The features are where the CPU computes already.
  const float* upload_input(const float* host_src, size_t) override { return host_src; }
  void copy(void* dst, const void* src, size_t bytes) override;
  void zero(void* ptr, size_t bytes) override;
  void synchronize() override {}

  void cast_acc_to_act(T* dst, const T* src, size_t n) override;
  void cast_act_to_acc(T* dst, const T* src, size_t n) override;
  void cast_f32_to_act(T* dst, const float* src, size_t n) override;
  void add_scaled(T* y, const T* x, const T* r, float alpha, size_t n) override;
  void accumulate_scaled(T* dy, const T* dx, float alpha, size_t n) override;
  void mask_padding(T* x, const int32_t* lengths, int B, int T_, int C) override;

  void gemm(bool trans_a, bool trans_b, int M, int N, int K, float alpha, const T* A, int lda,
            int64_t stride_a, const T* B, int ldb, int64_t stride_b, float beta, T* C, int ldc,
            int64_t stride_c, int batch) override;
  void linear_forward(T* out, const T* inp, const T* weight, const T* bias, int M, int K,
                      int N) override;
  void linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                       int M, int K, int N) override;

  void conv2d_forward(T* out, const T* inp, const T* weight, const T* bias, int B, int Cin, int H,
                      int W, int Cout) override;
  void conv2d_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                       int B, int Cin, int H, int W, int Cout) override;

  void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias,
                         int N, int C, float eps) override;
  void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                          const T* weight, const T* mean, const T* rstd, int N, int C) override;

  void relu_forward(T* out, const T* inp, size_t n) override;
  void relu_backward(T* dinp, const T* dout, const T* inp, size_t n) override;
  void swish_forward(T* out, const T* inp, size_t n) override;
  void swish_backward(T* dinp, const T* dout, const T* inp, size_t n) override;
  void glu_forward(T* out, const T* inp, int N, int C) override;
  void glu_backward(T* dinp, const T* dout, const T* inp, int N, int C) override;

  void dropout_forward(T* out, const T* inp, float p, uint64_t seed, uint64_t offset,
                       size_t n) override;
  void dropout_backward(T* dinp, const T* dout, float p, uint64_t seed, uint64_t offset,
                        size_t n) override;

  void qkv_split_rope_forward(T* q, T* k, T* v, const T* qkv, int B, int T_, int H,
                              int Dh) override;
  void qkv_split_rope_backward(T* dqkv, const T* dq, const T* dk, const T* dv, int B, int T_, int H,
                               int Dh) override;
  void masked_softmax_forward(T* probs, const T* scores, const int32_t* lengths, int B, int H,
                              int T_) override;
  void masked_softmax_backward(T* dscores, const T* dprobs, const T* probs, int B, int H,
                               int T_) override;
  void merge_heads_forward(T* out, const T* ctx, int B, int T_, int H, int Dh) override;
  void merge_heads_backward(T* dctx, const T* dout, int B, int T_, int H, int Dh) override;

  void depthwise_conv1d_forward(T* out, const T* inp, const T* weight, const T* bias,
                                const int32_t* lengths, int B, int T_, int C, int K) override;
  void depthwise_conv1d_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                                 const T* weight, const int32_t* lengths, int B, int T_, int C,
                                 int K) override;

  void log_softmax_forward(T* logprobs, const T* logits, int N, int V) override;
  void ctc_loss(double* losses, T* dlogits, const T* logprobs, const int32_t* targets,
                const int32_t* target_lengths, const int32_t* input_lengths,
                const double* grad_scale, const float* loss_scale, double* loss_sum, int B, int T_,
                int V) override;

  void add_sum_squares(double* sum, const T* g, size_t n) override;
  void decide_step(StepControl* control, const StepRule& rule) override;
  void adamw_step(T* w, T* w_act, const T* g, T* m, T* v, const AdamWSegment* segments,
                  int segment_count, size_t state_elements, const AdamWHyper& hyper,
                  const StepControl* control) override;

 private:
  // Sets this backend's OpenMP team size for the calling thread.
  void use_threads() const;

  int threads_;
};

extern template class CpuBackend<float>;
extern template class CpuBackend<double>;

}  // namespace mpiasr
