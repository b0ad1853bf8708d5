// CpuBackend: forwards each Backend operation to its kernel in kernels/cpu/
// on a team of the configured size (see cpu_backend.h).
#include "kernels/cpu/cpu_backend.h"

#include <cblas.h>
#include <omp.h>

#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/ctc_loss.h"
#include "kernels/cpu/depthwise_conv1d.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/log_softmax.h"
#include "src/base/error.h"

namespace mpiasr {

namespace {
constexpr size_t kAlignment = 256;
}

template <typename T>
CpuBackend<T>::CpuBackend(int num_threads)
    : threads_(num_threads > 0 ? num_threads : omp_get_num_procs()) {
  MPIASR_CHECK(num_threads >= 0, "thread count " << num_threads << " is negative");
  // Parallelism comes from the OpenMP teams around the BLAS calls.
  openblas_set_num_threads(1);
}

std::string openmp_wait_settings() {
  std::string settings;
  for (const char* name : {"OMP_WAIT_POLICY", "GOMP_SPINCOUNT"}) {
    const char* value = std::getenv(name);
    settings += std::string(settings.empty() ? "" : ", ") + name + "=" + (value ? value : "unset");
  }
  return settings;
}

template <typename T>
std::string CpuBackend<T>::name() const {
  // main() sets OPENBLAS_CORETYPE where OpenBLAS took the CPU for a generic one.
  const char* chose = std::getenv("MPIASR_OPENBLAS_CHOSE");
  return std::string(sizeof(T) == 4 ? "cpu-fp32" : "cpu-fp64") + " (" + std::to_string(threads_) +
         " threads, OpenBLAS " + openblas_core() +
         (chose ? std::string(", set for a CPU OpenBLAS took for ") + chose : "") + ")";
}

template <typename T>
void CpuBackend<T>::use_threads() const {
  omp_set_num_threads(threads_);
  // Other code in the process may have raised it; OpenBLAS is called from
  // inside the OpenMP team and must not start threads of its own.
  if (openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

// ---- memory -----------------------------------------------------------------

template <typename T>
void* CpuBackend<T>::alloc(size_t bytes) {
  const size_t rounded = (bytes + kAlignment - 1) / kAlignment * kAlignment;
  void* ptr = std::aligned_alloc(kAlignment, rounded == 0 ? kAlignment : rounded);
  if (!ptr) MPIASR_FAIL(ExitCode::kFailure, "out of host memory allocating " << bytes << " bytes");
  return ptr;
}

template <typename T>
void CpuBackend<T>::release(void* ptr) {
  std::free(ptr);
}

template <typename T>
void CpuBackend<T>::to_device(void* dst, const void* host_src, size_t bytes) {
  std::memcpy(dst, host_src, bytes);
}

template <typename T>
void CpuBackend<T>::to_host(void* host_dst, const void* src, size_t bytes) {
  std::memcpy(host_dst, src, bytes);
}

template <typename T>
void CpuBackend<T>::copy(void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
}

template <typename T>
void CpuBackend<T>::zero(void* ptr, size_t bytes) {
  std::memset(ptr, 0, bytes);
}

// ---- casts and elementwise --------------------------------------------------

template <typename T>
void CpuBackend<T>::cast_acc_to_act(T* dst, const T* src, size_t n) {
  use_threads();
  cpu_cast(dst, src, n);
}

template <typename T>
void CpuBackend<T>::cast_act_to_acc(T* dst, const T* src, size_t n) {
  use_threads();
  cpu_cast(dst, src, n);
}

template <typename T>
void CpuBackend<T>::cast_f32_to_act(T* dst, const float* src, size_t n) {
  use_threads();
  cpu_cast(dst, src, n);
}

template <typename T>
void CpuBackend<T>::mask_padding(T* x, const int32_t* lengths, int B, int T_, int C) {
  cpu_mask_padding(x, lengths, B, T_, C);
}

// ---- linear -----------------------------------------------------------------

template <typename T>
void CpuBackend<T>::linear_forward(T* out, const T* inp, const T* weight, const T* bias, int M,
                                   int K, int N) {
  use_threads();
  cpu_linear_forward(out, inp, weight, bias, M, K, N);
}

template <typename T>
void CpuBackend<T>::linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                                    const T* weight, int M, int K, int N) {
  use_threads();
  cpu_linear_backward(dinp, dweight, dbias, dout, inp, weight, M, K, N);
}

// ---- convolution subsampling ------------------------------------------------

template <typename T>
void CpuBackend<T>::conv2d_forward(T* out, const T* inp, const T* weight, const T* bias, int B,
                                   int Cin, int H, int W, int Cout, bool relu) {
  use_threads();
  cpu_conv2d_forward(out, inp, weight, bias, B, Cin, H, W, Cout, relu);
}

template <typename T>
void CpuBackend<T>::conv2d_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                                    const T* weight, int B, int Cin, int H, int W, int Cout) {
  use_threads();
  cpu_conv2d_backward(dinp, dweight, dbias, dout, inp, weight, B, Cin, H, W, Cout);
}

template <typename T>
void CpuBackend<T>::subsampling_first_conv_backward(T* dweight0, T* dbias0, const T* dout2,
                                                    const T* a1, const T* x, const T* weight2,
                                                    int B, int H, int W, int C, T*) {
  use_threads();
  cpu_subsampling_first_conv_backward(dweight0, dbias0, dout2, a1, x, weight2, B, H, W, C);
}

// ---- normalization ----------------------------------------------------------

template <typename T>
void CpuBackend<T>::layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight,
                                      const T* bias, int N, int C, float eps) {
  use_threads();
  cpu_layernorm_forward(out, mean, rstd, inp, weight, bias, N, C, eps);
}

template <typename T>
void CpuBackend<T>::residual_layernorm_forward(T* x, T* out, T* mean, T* rstd, const T* base,
                                               const T* branch, float scale, float p, uint64_t seed,
                                               uint64_t offset, const T* weight, const T* bias,
                                               int N, int C, float eps) {
  use_threads();
  const size_t n = size_t(N) * C;
  if (p > 0.0f) {
    cpu_dropout_forward(x, branch, p, seed, offset, n);
    branch = x;
  }
  cpu_add_scaled(x, base, branch, scale, n);
  cpu_layernorm_forward(out, mean, rstd, x, weight, bias, N, C, eps);
}

template <typename T>
void CpuBackend<T>::layernorm_swish_forward(T* normed, T* out, T* mean, T* rstd, const T* inp,
                                            const T* weight, const T* bias, int N, int C,
                                            float eps) {
  use_threads();
  cpu_layernorm_forward(normed, mean, rstd, inp, weight, bias, N, C, eps);
  cpu_swish_forward(out, normed, size_t(N) * C);
}

template <typename T>
void CpuBackend<T>::layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                                       const T* weight, const T* mean, const T* rstd, int N, int C,
                                       bool accumulate) {
  use_threads();
  cpu_layernorm_backward(dinp, dweight, dbias, dout, inp, weight, mean, rstd, N, C, accumulate);
}

template <typename T>
void CpuBackend<T>::layernorm_swish_backward(T* dinp, T* dweight, T* dbias, const T* dout,
                                             const T* inp, const T* normed, const T* weight,
                                             const T* mean, const T* rstd, int N, int C) {
  use_threads();
  // dinp holds the gradient at LayerNorm's output, then (in place) at its input.
  cpu_swish_backward(dinp, dout, normed, size_t(N) * C);
  cpu_layernorm_backward(dinp, dweight, dbias, dinp, inp, weight, mean, rstd, N, C, false);
}

// ---- activations ------------------------------------------------------------

template <typename T>
void CpuBackend<T>::relu_backward(T* dinp, const T* dout, const T* inp, size_t n) {
  use_threads();
  cpu_relu_backward(dinp, dout, inp, n);
}

template <typename T>
void CpuBackend<T>::swish_dropout_forward(T* out, const T* inp, float p, uint64_t seed,
                                          uint64_t offset, size_t n) {
  use_threads();
  cpu_swish_dropout_forward(out, inp, p, seed, offset, n);
}

template <typename T>
void CpuBackend<T>::swish_dropout_backward(T* dinp, const T* dout, const T* inp, float p,
                                           uint64_t seed, uint64_t offset, size_t n) {
  use_threads();
  cpu_swish_dropout_backward(dinp, dout, inp, p, seed, offset, n);
}

// ---- dropout ----------------------------------------------------------------

template <typename T>
void CpuBackend<T>::residual_dropout_backward(T* dbranch, const T* dx, float scale, float p,
                                              uint64_t seed, uint64_t offset, size_t n) {
  use_threads();
  cpu_dropout_backward(dbranch, dx, scale, p, seed, offset, n);
}

// ---- attention --------------------------------------------------------------

template <typename T>
void CpuBackend<T>::attention_forward(T* out, T* lse, const T* qkv, const int32_t* lengths, int B,
                                      int T_, int H, int Dh, float scale) {
  use_threads();
  cpu_attention_forward(out, lse, qkv, lengths, B, T_, H, Dh, T(scale));
}

template <typename T>
void CpuBackend<T>::attention_backward(T* dqkv, const T* dout, const T* out, const T* lse,
                                       const T* qkv, const int32_t* lengths, int B, int T_, int H,
                                       int Dh, float scale) {
  use_threads();
  cpu_attention_backward(dqkv, dout, out, lse, qkv, lengths, B, T_, H, Dh, T(scale));
}

// ---- GLU + depthwise conv1d --------------------------------------------------

template <typename T>
void CpuBackend<T>::glu_depthwise_conv1d_forward(T* out, const T* inp, const T* weight,
                                                 const T* bias, const int32_t* lengths, int B,
                                                 int T_, int C, int K) {
  use_threads();
  gated_.resize(size_t(B) * T_ * C);
  cpu_glu_forward(gated_.data(), inp, B * T_, C);
  cpu_depthwise_conv1d_forward(out, gated_.data(), weight, bias, lengths, B, T_, C, K);
}

template <typename T>
void CpuBackend<T>::glu_depthwise_conv1d_backward(T* dinp, T* dweight, T* dbias, const T* dout,
                                                  const T* inp, const T* weight,
                                                  const int32_t* lengths, int B, int T_, int C,
                                                  int K) {
  use_threads();
  const size_t n = size_t(B) * T_ * C;
  gated_.resize(n);
  cpu_glu_forward(gated_.data(), inp, B * T_, C);
  if (dinp) dgated_.resize(n);
  cpu_depthwise_conv1d_backward(dinp ? dgated_.data() : nullptr, dweight, dbias, dout,
                                gated_.data(), weight, lengths, B, T_, C, K);
  // Padded frames get dgated 0, so dinp 0 there.
  if (dinp) cpu_glu_backward(dinp, dgated_.data(), inp, B * T_, C);
}

// ---- output head, loss, optimizer -------------------------------------------

template <typename T>
void CpuBackend<T>::log_softmax_forward(T* logprobs, const T* logits, int N, int V) {
  use_threads();
  cpu_log_softmax_forward(logprobs, logits, N, V);
}

template <typename T>
void CpuBackend<T>::ctc_loss(double* losses, T* dlogits, const T* logprobs, const int32_t* targets,
                             const int32_t* target_lengths, const int32_t* input_lengths,
                             const double* grad_scale, const float* loss_scale, double* loss_sum,
                             int B, int T_, int V) {
  use_threads();
  std::vector<double> scaled;
  if (grad_scale && loss_scale) {
    scaled.assign(grad_scale, grad_scale + std::max(B, 0));
    for (double& scale : scaled) scale *= double(*loss_scale);
    grad_scale = scaled.data();
  }
  cpu_ctc_loss(losses, dlogits, logprobs, targets, target_lengths, input_lengths, grad_scale, B, T_,
               V);
  if (!loss_sum) return;
  for (int b = 0; b < B; ++b) {
    if (!grad_scale || grad_scale[b] != 0.0) *loss_sum += losses[b];
  }
}

template <typename T>
void CpuBackend<T>::add_sum_squares(double* sum, const T* g, size_t n) {
  use_threads();
  *sum += cpu_sum_squares(g, n);
}

template <typename T>
void CpuBackend<T>::decide_step(StepControl* control, const StepRule& rule) {
  mpiasr::decide_step(*control, rule);
}

template <typename T>
void CpuBackend<T>::adamw_step(T* w, T* w_act, const T* g, T* m, T* v, const AdamWSegment* segments,
                               int segment_count, size_t, const AdamWHyper& hyper,
                               const StepControl* control) {
  if (!control->apply) return;
  use_threads();
  for (int s = 0; s < segment_count; ++s) {
    const AdamWSegment& segment = segments[s];
    cpu_adamw_step(w + segment.offset, w_act ? w_act + segment.offset : nullptr, g + segment.offset,
                   m + segment.state_offset, v + segment.state_offset, segment.count,
                   adamw_coefficients<T>(*control, hyper, segment.weight_decay));
  }
}

template class CpuBackend<float>;
template class CpuBackend<double>;

}  // namespace mpiasr
