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
#include <vector>

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
  void mask_padding(T* x, const int32_t* lengths, int B, int T_, int C) override;

  void linear_forward(T* out, const T* inp, const T* weight, const T* bias, int M, int K,
                      int N) override;
  void linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                       int M, int K, int N) override;

  void conv2d_forward(T* out, const T* inp, const T* weight, const T* bias, int B, int Cin, int H,
                      int W, int Cout, bool relu) override;
  void conv2d_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp, const T* weight,
                       int B, int Cin, int H, int W, int Cout) override;
  void subsampling_first_conv_backward(T* dweight0, T* dbias0, const T* dout2, const T* a1,
                                       const T* x, const T* weight2, int B, int H, int W, int C,
                                       T* da1_scratch) override;
  bool subsampling_da1_scratch() const override { return false; }

  void layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias,
                         int N, int C, float eps) override;
  void residual_layernorm_forward(T* x, T* out, T* mean, T* rstd, const T* base, const T* branch,
                                  float scale, float p, uint64_t seed, uint64_t offset,
                                  const T* weight, const T* bias, int N, int C, float eps) override;
  void layernorm_swish_forward(T* normed, T* out, T* mean, T* rstd, const T* inp, const T* weight,
                               const T* bias, int N, int C, float eps) override;
  void layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                          const T* weight, const T* mean, const T* rstd, int N, int C,
                          bool accumulate) override;
  void layernorm_swish_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                                const T* normed, const T* weight, const T* mean, const T* rstd,
                                int N, int C) override;

  void relu_backward(T* dinp, const T* dout, const T* inp, size_t n) override;
  void swish_dropout_forward(T* out, const T* inp, float p, uint64_t seed, uint64_t offset,
                             size_t n) override;
  void swish_dropout_backward(T* dinp, const T* dout, const T* inp, float p, uint64_t seed,
                              uint64_t offset, size_t n) override;

  void residual_dropout_backward(T* dbranch, const T* dx, float scale, float p, uint64_t seed,
                                 uint64_t offset, size_t n) override;

  void attention_forward(T* out, T* lse, const T* qkv, const int32_t* lengths, int B, int T_, int H,
                         int Dh, float scale) override;
  void attention_backward(T* dqkv, const T* dout, const T* out, const T* lse, const T* qkv,
                          const int32_t* lengths, int B, int T_, int H, int Dh,
                          float scale) override;

  void glu_depthwise_conv1d_forward(T* out, const T* inp, const T* weight, const T* bias,
                                    const int32_t* lengths, int B, int T_, int C, int K) override;
  void glu_depthwise_conv1d_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
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
  // The GLU's output and its gradient for glu_depthwise_conv1d_*, which the
  // CPU composes from its single ops; kept to spare an allocation per call.
  std::vector<T> gated_, dgated_;
};

extern template class CpuBackend<float>;
extern template class CpuBackend<double>;

// The OpenMP wait settings in effect, as libgomp reads them when it is loaded:
// "OMP_WAIT_POLICY=passive, GOMP_SPINCOUNT=10000" ("unset" for a variable not
// set). The mpiasr program sets them for itself (src/main.cpp); `mpiasr
// --version` and the benchmarks print them.
std::string openmp_wait_settings();

}  // namespace mpiasr
