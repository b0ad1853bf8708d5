// RooflineBackend: a backend that computes nothing and tallies, for every
// operation the model asks of it, the floating-point operations of its matrix
// products and convolutions and the bytes it must move to and from device
// memory, for an analytic roofline of a training step:
//
//   flops   2 per multiply-add of every GEMM, linear, convolution and of
//           attention's products (the products forward_flops counts,
//           model/presets.h); elementwise work is not counted
//   bytes   each operation reads each input once and writes each output
//           once, in its storage type (Act, Acc, int32, double); "+="
//           outputs are read and written. This is the least traffic of the
//           operations as the model calls them (fused where the interface
//           fuses, no cache reuse across calls); scratch inside an operation
//           (the CTC recursions, im2col, attention's scores, which stay on
//           chip) is not counted
//   time    per operation max(flops / peak FLOP/s, bytes / peak bandwidth),
//           summed over the step, where flops include the work an operation
//           repeats (attention's backward recomputes the scores: 2 B H T^2 Dh
//           more): no operation finishes sooner on that device, so model
//           flops / peak FLOP/s over this sum bounds MFU
//
// Memory is never touched: alloc hands out addresses in an unmapped range (a
// stray read by the model on the host would fault), to_host writes zeros, and
// copies from the host are counted as host-to-device bytes only. With Act and
// Acc the GPU's types (__half, float) a Conformer built on it plans its
// activation arena exactly as on the GPU, at any size, in no time.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels/backend.h"

namespace mpiasr {

struct RooflineTally {
  double flops = 0;           // matrix products and convolutions
  double bytes = 0;           // device memory read + written
  double host_to_device = 0;  // bytes copied from the host
  double operations = 0;      // backend calls that run on the device
  double bound_seconds = 0;   // sum of max(flops / peak, bytes / bandwidth)
};

template <typename Act, typename Acc>
class RooflineBackend final : public Backend<Act, Acc> {
 public:
  // peak_flops (FLOP/s, dense 16-bit tensor core) and peak_bytes_per_s: the device's.
  RooflineBackend(double peak_flops, double peak_bytes_per_s)
      : peak_flops_(peak_flops), peak_bytes_per_s_(peak_bytes_per_s) {}

  const RooflineTally& tally() const { return tally_; }
  void reset_tally() { tally_ = {}; }
  // Bytes handed out by alloc and not released, and their high-water mark.
  size_t allocated() const { return allocated_; }
  size_t peak_allocated() const { return peak_allocated_; }

  std::string name() const override { return "roofline"; }

  void* alloc(size_t bytes) override {
    const size_t rounded = std::max<size_t>((bytes + 255) / 256 * 256, 256);
    void* ptr = reinterpret_cast<void*>(next_address_);
    next_address_ += rounded;
    allocated_ += rounded;
    peak_allocated_ = std::max(peak_allocated_, allocated_);
    sizes_.push_back({ptr, rounded});
    return ptr;
  }
  void release(void* ptr) override {
    for (size_t i = 0; i < sizes_.size(); ++i) {
      if (sizes_[i].first == ptr) {
        allocated_ -= sizes_[i].second;
        sizes_.erase(sizes_.begin() + long(i));
        return;
      }
    }
  }
  void to_device(void*, const void*, size_t bytes) override { tally_.host_to_device += bytes; }
  void to_host(void* host_dst, const void*, size_t bytes) override {
    std::memset(host_dst, 0, bytes);
  }
  const float* upload_input(const float*, size_t n) override {
    tally_.host_to_device += double(n) * sizeof(float);
    if (!input_) input_ = static_cast<const float*>(alloc(1));
    return input_;
  }
  void copy(void*, const void*, size_t bytes) override { op(0, 2.0 * bytes); }
  void zero(void*, size_t bytes) override { op(0, bytes); }
  void synchronize() override {}

  void cast_acc_to_act(Act*, const Acc*, size_t n) override { op(0, n * (kAcc + kAct)); }
  void cast_act_to_acc(Acc*, const Act*, size_t n) override { op(0, n * (kAct + kAcc)); }
  void cast_f32_to_act(Act*, const float*, size_t n) override { op(0, n * (4.0 + kAct)); }
  void mask_padding(Act*, const int32_t* lengths, int B, int T, int C) override {
    double padded = 0;
    for (int b = 0; b < B; ++b) padded += std::max(0, T - lengths[b]);
    op(0, padded * C * kAct);
  }

  void linear_forward(Act*, const Act*, const Act*, const Act* bias, int M, int K, int N) override {
    const double m = M, n = N, k = K;
    op(2.0 * m * n * k, (m * k + n * k + m * n + (bias ? n : 0)) * kAct);
  }
  void linear_backward(Act* dinp, Acc* dweight, Acc* dbias, const Act*, const Act*, const Act*,
                       int M, int K, int N) override {
    const double m = M, n = N, k = K;
    if (dinp) op(2.0 * m * n * k, (m * n + n * k + m * k) * kAct);
    if (dweight) op(2.0 * m * n * k, (m * n + m * k) * kAct + 2.0 * n * k * kAcc);
    // With dW, the dW GEMM's epilogue sums dbias's increment into scratch
    // (n floats) and a small kernel adds it; without, a pass over dout.
    if (dbias) op(0, (dweight ? 3.0 * n : 2.0 * n) * kAcc + (dweight ? 0.0 : m * n * kAct));
  }

  void conv2d_forward(Act*, const Act*, const Act*, const Act*, int B, int Cin, int H, int W,
                      int Cout, bool) override {
    const double out = double(B) * ((H - 3) / 2 + 1) * ((W - 3) / 2 + 1) * Cout;
    op(2.0 * out * Cin * 9, (double(B) * H * W * Cin + 9.0 * Cout * Cin + Cout + out) * kAct);
  }
  void conv2d_backward(Act* dinp, Acc* dweight, Acc* dbias, const Act*, const Act*, const Act*,
                       int B, int Cin, int H, int W, int Cout) override {
    const double out = double(B) * ((H - 3) / 2 + 1) * ((W - 3) / 2 + 1) * Cout;
    const double inp = double(B) * H * W * Cin, weight = 9.0 * Cout * Cin;
    if (dinp) op(2.0 * out * Cin * 9, (out + weight + inp) * kAct);
    if (dweight) op(2.0 * out * Cin * 9, (out + inp) * kAct + 2.0 * weight * kAcc);
    if (dbias) op(0, out * kAct + 2.0 * Cout * kAcc);
  }
  // Counted as the GPU backend runs it: da1 whole, the ReLU, then the first
  // layer's gradients.
  void subsampling_first_conv_backward(Acc* dweight0, Acc* dbias0, const Act*, const Act*,
                                       const Act*, const Act*, int B, int H, int W, int C,
                                       Act* da1_scratch) override {
    const int H1 = (H - 3) / 2 + 1, W1 = (W - 3) / 2 + 1;
    conv2d_backward(da1_scratch, nullptr, nullptr, nullptr, nullptr, nullptr, B, C, H1, W1, C);
    relu_backward(nullptr, nullptr, nullptr, size_t(B) * H1 * W1 * C);
    conv2d_backward(nullptr, dweight0, dbias0, nullptr, nullptr, nullptr, B, 1, H, W, C);
  }
  bool subsampling_da1_scratch() const override { return true; }

  void layernorm_forward(Act*, Acc*, Acc*, const Act*, const Act*, const Act*, int N, int C,
                         float) override {
    op(0, (2.0 * N * C + 2.0 * C) * kAct + 2.0 * N * kAcc);
  }
  void residual_layernorm_forward(Act*, Act*, Acc*, Acc*, const Act*, const Act*, float, float,
                                  uint64_t, uint64_t, const Act*, const Act*, int N, int C,
                                  float) override {
    // base, branch read; x, out written; weight, bias read; mean, rstd written.
    op(0, (4.0 * N * C + 2.0 * C) * kAct + 2.0 * N * kAcc);
  }
  void layernorm_swish_forward(Act*, Act*, Acc*, Acc*, const Act*, const Act*, const Act*, int N,
                               int C, float) override {
    op(0, (3.0 * N * C + 2.0 * C) * kAct + 2.0 * N * kAcc);
  }
  void layernorm_backward(Act*, Acc* dweight, Acc* dbias, const Act*, const Act*, const Act*,
                          const Acc*, const Acc*, int N, int C, bool accumulate) override {
    // dout, inp, weight read; dinp written (+= when accumulating); mean, rstd
    // read; dweight, dbias +=.
    op(0, ((accumulate ? 4.0 : 3.0) * N * C + C) * kAct + 2.0 * N * kAcc +
              ((dweight ? 2.0 : 0) + (dbias ? 2.0 : 0)) * C * kAcc);
  }
  void layernorm_swish_backward(Act*, Acc* dweight, Acc* dbias, const Act*, const Act*, const Act*,
                                const Act*, const Acc*, const Acc*, int N, int C) override {
    // dout, inp, normed, weight read; dinp written; mean, rstd read; dweight, dbias +=.
    op(0, (4.0 * N * C + C) * kAct + 2.0 * N * kAcc +
              ((dweight ? 2.0 : 0) + (dbias ? 2.0 : 0)) * C * kAcc);
  }

  void relu_backward(Act*, const Act*, const Act*, size_t n) override { op(0, 3.0 * n * kAct); }
  void swish_dropout_forward(Act*, const Act*, float, uint64_t, uint64_t, size_t n) override {
    op(0, 2.0 * n * kAct);
  }
  void swish_dropout_backward(Act*, const Act*, const Act*, float, uint64_t, uint64_t,
                              size_t n) override {
    op(0, 3.0 * n * kAct);
  }
  void residual_dropout_backward(Act*, const Act*, float, float, uint64_t, uint64_t,
                                 size_t n) override {
    op(0, 2.0 * n * kAct);
  }

  // S = q k^T and P v: 4 B H T^2 Dh forward; dV, dP, dQ, dK backward (8) plus
  // S recomputed (2, in time only).
  void attention_forward(Act*, Acc*, const Act*, const int32_t*, int B, int T, int H, int Dh,
                         float) override {
    const double rows_c = double(B) * T * H * Dh, products = double(B) * H * T * T * Dh;
    op(4.0 * products, 4.0 * rows_c * kAct + double(B) * H * T * kAcc + B * 4.0);
  }
  void attention_backward(Act*, const Act*, const Act*, const Acc*, const Act*, const int32_t*,
                          int B, int T, int H, int Dh, float) override {
    // dout, out, qkv read; dqkv written; lse read.
    const double rows_c = double(B) * T * H * Dh, products = double(B) * H * T * T * Dh;
    op(8.0 * products, 8.0 * rows_c * kAct + double(B) * H * T * kAcc + B * 4.0, 2.0 * products);
  }

  // The GLU is computed where the convolution reads its input: the [B, T, 2C]
  // projection is read, no [B, T, C] product is stored.
  void glu_depthwise_conv1d_forward(Act*, const Act*, const Act*, const Act*, const int32_t*, int B,
                                    int T, int C, int K) override {
    const double n = double(B) * T * C;
    op(2.0 * n * K, (3.0 * n + double(C) * (K + 1)) * kAct);
  }
  void glu_depthwise_conv1d_backward(Act* dinp, Acc* dweight, Acc* dbias, const Act*, const Act*,
                                     const Act*, const int32_t*, int B, int T, int C,
                                     int K) override {
    const double n = double(B) * T * C;
    // dout and the projection read, both halves of dinp written.
    if (dinp) op(2.0 * n * K, (5.0 * n + double(C) * K) * kAct);
    if (dweight) op(2.0 * n * K, 3.0 * n * kAct + 2.0 * C * K * kAcc);
    if (dbias) op(0, n * kAct + 2.0 * C * kAcc);
  }

  void log_softmax_forward(Acc*, const Act*, int N, int V) override {
    op(0, double(N) * V * (kAct + kAcc));
  }
  void ctc_loss(double*, Act*, const Acc*, const int32_t*, const int32_t* target_lengths,
                const int32_t*, const double*, const float*, double*, int B, int T,
                int V) override {
    double targets = 0;
    for (int b = 0; b < B; ++b) targets += target_lengths[b];
    op(0, double(B) * T * V * (kAcc + kAct) + targets * 4.0 + B * 8.0);
  }

  void add_sum_squares(double*, const Acc*, size_t n) override { op(0, n * kAcc); }
  void decide_step(StepControl*, const StepRule&) override { op(0, 2.0 * sizeof(StepControl)); }
  void adamw_step(Acc*, Act* w_act, const Acc*, Acc*, Acc*, const AdamWSegment*, int segment_count,
                  size_t state_elements, const AdamWHyper&, const StepControl*) override {
    // w, g, m, v read; w, m, v written; the compute copy written; the segments read.
    const double n = double(state_elements);
    op(0, 7.0 * n * kAcc + (w_act ? n * kAct : 0) + segment_count * sizeof(AdamWSegment));
  }

 private:
  static constexpr double kAct = sizeof(Act), kAcc = sizeof(Acc);

  // repeated_flops: work done again (recomputation), in the time only.
  void op(double flops, double bytes, double repeated_flops = 0) {
    tally_.flops += flops;
    tally_.bytes += bytes;
    tally_.operations += 1;
    tally_.bound_seconds +=
        std::max((flops + repeated_flops) / peak_flops_, bytes / peak_bytes_per_s_);
  }

  double peak_flops_, peak_bytes_per_s_;
  RooflineTally tally_;
  uintptr_t next_address_ = uintptr_t(1) << 46;  // unmapped in user space
  size_t allocated_ = 0, peak_allocated_ = 0;
  std::vector<std::pair<void*, size_t>> sizes_;
  const float* input_ = nullptr;
};

}  // namespace mpiasr
