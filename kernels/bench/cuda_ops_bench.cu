// Microbenchmarks of the CUDA backend's operations at the shapes of `medium`
// (d 256, 4 heads, depthwise kernel 31) on a batch of 32 utterances of 15 s
// (1500 frames, 375 after subsampling), vocabulary 256, through CudaBackend.
// Each figure is timed with CUDA events around the operation alone.
//
// Counters: TFLOP/s (2 flops per multiply-add) and its ratio to the device's
// dense fp16 tensor-core peak (peak_frac) for GEMM-like ops; GB/s (every byte
// the op must read and write once) and its ratio to the memory bandwidth
// peak for memory-bound ops. Peaks come from kernels/cuda/cuda_device.h.
// Without a CUDA device it prints SKIP, or lists its benchmarks, and exits 0
// (kernels/bench/cuda_bench_skip.h).
#include <benchmark/benchmark.h>
#include <cuda_fp16.h>

#include <cstdio>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kernels/bench/cuda_bench_skip.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.h"
#include "kernels/cuda/cuda_resources.h"
#include "kernels/cuda/launch.h"

namespace mpiasr {
namespace {

// Batch 32 x 15 s of medium.
constexpr int kB = 32, kT = 375, kD = 256, kH = 4, kDh = kD / kH, kKernel = 31, kV = 256;
constexpr int kRows = kB * kT;
constexpr int kInputFrames = 1500, kMels = 80, kChannels = 256;
constexpr size_t kParameters = size_t(30) << 20;  // ~medium's parameter count

CudaBackend<__half>* g_backend = nullptr;

// Fills x [n] with values in [-1, 1) from a hash of the index.
template <typename T>
__global__ void fill_kernel(T* x, size_t n, uint32_t seed) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 0x9E3779B1u ^ seed;
    h ^= h >> 15;
    h *= 0x85EBCA77u;
    h ^= h >> 13;
    x[i] = T(float(h >> 8) / 8388608.0f - 1.0f);
  }
}

// A device buffer of n T from the backend's arena, filled with random values.
template <typename T>
class Buffer {
 public:
  explicit Buffer(size_t n, uint32_t seed = 1) : n_(n) {
    ptr_ = static_cast<T*>(g_backend->alloc(n * sizeof(T)));
    MPIASR_LAUNCH(fill_kernel, 1024, 256, 0, g_backend->stream(), ptr_, n, seed);
  }
  ~Buffer() { g_backend->release(ptr_); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  T* get() const { return ptr_; }

 private:
  size_t n_;
  T* ptr_ = nullptr;
};
using Half = Buffer<__half>;
using Float = Buffer<float>;

// Times op() with events on the backend's stream (one warm-up call first)
// and sets the throughput counters from its bytes and flops per call.
void run(benchmark::State& state, double bytes, double flops, const std::function<void()>& op) {
  CudaBackend<__half>& be = *g_backend;
  const CudaDeviceInfo& info = be.device_info();
  CudaEvent start(true), stop(true);
  op();
  be.synchronize();
  double seconds = 0.0;
  for (auto _ : state) {
    start.record(be.stream());
    op();
    stop.record(be.stream());
    CUDA_CHECK(cudaEventSynchronize(stop.get()));
    const double s = stop.elapsed_ms_since(start) / 1e3;
    state.SetIterationTime(s);
    seconds += s;
  }
  const double calls = double(state.iterations());
  if (flops > 0) {
    const double tflops = flops * calls / seconds / 1e12;
    state.counters["TFLOP/s"] = tflops;
    if (info.peak_fp16_tflops > 0) state.counters["peak_frac"] = tflops / info.peak_fp16_tflops;
  } else {
    const double gbps = bytes * calls / seconds / 1e9;
    state.counters["GB/s"] = gbps;
    if (info.peak_memory_gbps > 0) state.counters["peak_frac"] = gbps / info.peak_memory_gbps;
  }
}

constexpr double kHalf = 2.0, kFloat = 4.0;

// ---- GEMM-like ------------------------------------------------------------------

void BM_linear_forward_ffn1(benchmark::State& state) {
  Half inp(size_t(kRows) * kD), w(size_t(4) * kD * kD), b(4 * kD), out(size_t(kRows) * 4 * kD);
  run(state, 0, 2.0 * kRows * kD * 4 * kD, [&] {
    g_backend->linear_forward(out.get(), inp.get(), w.get(), b.get(), kRows, kD, 4 * kD);
  });
}

void BM_linear_backward_ffn1(benchmark::State& state) {
  Half inp(size_t(kRows) * kD), w(size_t(4) * kD * kD), dout(size_t(kRows) * 4 * kD);
  Half dinp(size_t(kRows) * kD);
  Float dw(size_t(4) * kD * kD), db(4 * kD);
  run(state, 0, 4.0 * kRows * kD * 4 * kD, [&] {
    g_backend->linear_backward(dinp.get(), dw.get(), db.get(), dout.get(), inp.get(), w.get(),
                               kRows, kD, 4 * kD);
  });
}

std::vector<int32_t> full_lengths() {
  return std::vector<int32_t>(kB, kT);
}

// Fused attention on tensor cores; flops of the score and context products
// (4 B H T^2 Dh), backward 10 B H T^2 Dh (the scores and dP computed in both
// of its kernels, dV, dQ, dK).
void BM_attention_forward(benchmark::State& state) {
  const size_t n = size_t(kRows) * kD;
  Half qkv(3 * n), out(n);
  Float lse(size_t(kB) * kH * kT);
  const std::vector<int32_t> lengths = full_lengths();
  run(state, 0, 4.0 * kB * kH * kT * kT * kDh, [&] {
    g_backend->attention_forward(out.get(), lse.get(), qkv.get(), lengths.data(), kB, kT, kH, kDh,
                                 0.125f);
  });
}

void BM_attention_backward(benchmark::State& state) {
  const size_t n = size_t(kRows) * kD;
  Half qkv(3 * n), out(n), dout(n), dqkv(3 * n);
  Float lse(size_t(kB) * kH * kT);
  const std::vector<int32_t> lengths = full_lengths();
  g_backend->attention_forward(out.get(), lse.get(), qkv.get(), lengths.data(), kB, kT, kH, kDh,
                               0.125f);
  run(state, 0, 10.0 * kB * kH * kT * kT * kDh, [&] {
    g_backend->attention_backward(dqkv.get(), dout.get(), out.get(), lse.get(), qkv.get(),
                                  lengths.data(), kB, kT, kH, kDh, 0.125f);
  });
}

// The subsampling's second convolution: C -> C channels on [B, 749, 39].
void BM_conv2d_forward(benchmark::State& state) {
  const int H = (kInputFrames - 1) / 2, W = (kMels - 1) / 2, Ho = (H - 3) / 2 + 1,
            Wo = (W - 3) / 2 + 1;
  const int B = kB / 2;
  Half inp(size_t(B) * H * W * kChannels), w(size_t(kChannels) * kChannels * 9), b(kChannels);
  Half out(size_t(B) * Ho * Wo * kChannels);
  run(state, 0, 2.0 * B * Ho * Wo * kChannels * 9.0 * kChannels, [&] {
    g_backend->conv2d_forward(out.get(), inp.get(), w.get(), b.get(), B, kChannels, H, W, kChannels,
                              true);
  });
}

void BM_conv2d_backward(benchmark::State& state) {
  const int H = (kInputFrames - 1) / 2, W = (kMels - 1) / 2, Ho = (H - 3) / 2 + 1,
            Wo = (W - 3) / 2 + 1;
  const int B = kB / 2;
  Half inp(size_t(B) * H * W * kChannels), w(size_t(kChannels) * kChannels * 9);
  Half dout(size_t(B) * Ho * Wo * kChannels), dinp(size_t(B) * H * W * kChannels);
  Float dw(size_t(kChannels) * kChannels * 9), db(kChannels);
  run(state, 0, 4.0 * B * Ho * Wo * kChannels * 9.0 * kChannels, [&] {
    g_backend->conv2d_backward(dinp.get(), dw.get(), db.get(), dout.get(), inp.get(), w.get(), B,
                               kChannels, H, W, kChannels);
  });
}

// ---- memory-bound -----------------------------------------------------------------

void BM_layernorm_forward(benchmark::State& state) {
  const size_t n = size_t(kRows) * kD;
  Half inp(n), w(kD), b(kD), out(n);
  Float mean(kRows), rstd(kRows);
  run(state, 2 * n * kHalf, 0, [&] {
    g_backend->layernorm_forward(out.get(), mean.get(), rstd.get(), inp.get(), w.get(), b.get(),
                                 kRows, kD, 1e-5f);
  });
}

void BM_layernorm_backward(benchmark::State& state) {
  const size_t n = size_t(kRows) * kD;
  Half inp(n), w(kD), dout(n), dinp(n);
  Float mean(kRows), rstd(kRows), dw(kD), db(kD);
  run(state, 4 * n * kHalf, 0, [&] {
    g_backend->layernorm_backward(dinp.get(), dw.get(), db.get(), dout.get(), inp.get(), w.get(),
                                  mean.get(), rstd.get(), kRows, kD, true);
  });
}

void BM_swish_dropout_forward(benchmark::State& state) {
  const size_t n = size_t(kRows) * 4 * kD;
  Half inp(n), out(n);
  run(state, 2 * n * kHalf, 0,
      [&] { g_backend->swish_dropout_forward(out.get(), inp.get(), 0.1f, 42, 0, n); });
}

void BM_residual_dropout_backward(benchmark::State& state) {
  const size_t n = size_t(kRows) * kD;
  Half dx(n), dbranch(n);
  run(state, 2 * n * kHalf, 0,
      [&] { g_backend->residual_dropout_backward(dbranch.get(), dx.get(), 0.5f, 0.1f, 42, 0, n); });
}

// x = base + 1/2 Dropout(branch) and LN(x): reads base and branch, writes x and LN(x).
void BM_residual_layernorm_forward(benchmark::State& state) {
  const size_t n = size_t(kRows) * kD;
  Half base(n), branch(n), w(kD), b(kD), x(n), out(n);
  Float mean(kRows), rstd(kRows);
  run(state, 4 * n * kHalf, 0, [&] {
    g_backend->residual_layernorm_forward(x.get(), out.get(), mean.get(), rstd.get(), base.get(),
                                          branch.get(), 0.5f, 0.1f, 42, 0, w.get(), b.get(), kRows,
                                          kD, 1e-5f);
  });
}

// The conv module's GLU and depthwise convolution: reads the [rows, 2d]
// projection, writes [rows, d].
void BM_glu_depthwise_conv1d_forward(benchmark::State& state) {
  const size_t n = size_t(kRows) * kD;
  Half inp(2 * n), w(size_t(kD) * kKernel), b(kD), out(n);
  const std::vector<int32_t> lengths = full_lengths();
  run(state, 3 * n * kHalf, 0, [&] {
    g_backend->glu_depthwise_conv1d_forward(out.get(), inp.get(), w.get(), b.get(), lengths.data(),
                                            kB, kT, kD, kKernel);
  });
}

// Reads dout and the projection, writes the projection's gradient.
void BM_glu_depthwise_conv1d_backward(benchmark::State& state) {
  const size_t n = size_t(kRows) * kD;
  Half inp(2 * n), w(size_t(kD) * kKernel), dout(n), dinp(2 * n);
  Float dw(size_t(kD) * kKernel), db(kD);
  const std::vector<int32_t> lengths = full_lengths();
  run(state, 5 * n * kHalf, 0, [&] {
    g_backend->glu_depthwise_conv1d_backward(dinp.get(), dw.get(), db.get(), dout.get(), inp.get(),
                                             w.get(), lengths.data(), kB, kT, kD, kKernel);
  });
}

void BM_log_softmax(benchmark::State& state) {
  const size_t n = size_t(kRows) * kV;
  Half logits(n);
  Float logprobs(n);
  run(state, n * (kHalf + kFloat), 0,
      [&] { g_backend->log_softmax_forward(logprobs.get(), logits.get(), kRows, kV); });
}

// CTC on log-probs of random logits, 150 tokens per utterance; GB/s counts the
// log-probs read and the gradient written once (the recursions add more).
void BM_ctc_loss(benchmark::State& state) {
  const size_t n = size_t(kRows) * kV;
  Half logits(n), dlogits(n);
  Float logprobs(n);
  g_backend->log_softmax_forward(logprobs.get(), logits.get(), kRows, kV);
  const int L = 150;
  std::vector<int32_t> targets(size_t(kB) * L), target_lengths(kB, L), input_lengths(kB, kT);
  for (size_t i = 0; i < targets.size(); ++i) targets[i] = 1 + int32_t((i * 7919) % (kV - 1));
  std::vector<double> grad_scale(kB, 1.0);
  Buffer<double> losses(kB);
  run(state, n * (kFloat + kHalf), 0, [&] {
    g_backend->ctc_loss(losses.get(), dlogits.get(), logprobs.get(), targets.data(),
                        target_lengths.data(), input_lengths.data(), grad_scale.data(), nullptr,
                        nullptr, kB, kT, kV);
  });
}

// ---- optimizer ------------------------------------------------------------------

// A decided step for AdamW to apply (kernels/step_control.h).
StepControl* decided_control() {
  static StepControl* control = [] {
    auto* device = static_cast<StepControl*>(g_backend->alloc(sizeof(StepControl)));
    StepControl host;
    host.lr = 1e-3f;
    host.grad_sum_squares = 1.0;
    g_backend->to_device(device, &host, sizeof host);
    g_backend->decide_step(device, StepRule{});
    return device;
  }();
  return control;
}

void BM_adamw_step(benchmark::State& state) {
  Float w(kParameters), g(kParameters), m(kParameters), v(kParameters);
  Half w_act(kParameters);
  StepControl* control = decided_control();
  // 500 segments with decay on every other, about as many as the runs of
  // weights and of other tensors in the presets: the kernel's search included.
  constexpr size_t kSegments = 500;
  std::vector<AdamWSegment> segments(kSegments);
  for (size_t s = 0; s < kSegments; ++s) {
    const size_t begin = kParameters * s / kSegments, end = kParameters * (s + 1) / kSegments;
    segments[s] = {begin, end - begin, begin, s % 2 ? 0.0f : 1e-3f};
  }
  Buffer<AdamWSegment> d_segments(kSegments);
  g_backend->to_device(d_segments.get(), segments.data(), kSegments * sizeof(AdamWSegment));
  // w, m, v read and written, g read, the half copy written.
  run(state, kParameters * (7 * kFloat + kHalf), 0, [&] {
    g_backend->adamw_step(w.get(), w_act.get(), g.get(), m.get(), v.get(), d_segments.get(),
                          int(kSegments), kParameters, AdamWHyper{0.9f, 0.98f, 1e-9f}, control);
  });
}

void BM_sum_squares(benchmark::State& state) {
  Float g(kParameters);
  Buffer<double> sum(1);
  run(state, kParameters * kFloat, 0,
      [&] { g_backend->add_sum_squares(sum.get(), g.get(), kParameters); });
}

void register_benchmarks() {
  const std::vector<std::pair<const char*, void (*)(benchmark::State&)>> all = {
      {"linear_forward_ffn1", BM_linear_forward_ffn1},
      {"linear_backward_ffn1", BM_linear_backward_ffn1},
      {"attention_forward", BM_attention_forward},
      {"attention_backward", BM_attention_backward},
      {"conv2d_forward", BM_conv2d_forward},
      {"conv2d_backward", BM_conv2d_backward},
      {"layernorm_forward", BM_layernorm_forward},
      {"layernorm_backward", BM_layernorm_backward},
      {"swish_dropout_forward", BM_swish_dropout_forward},
      {"residual_dropout_backward", BM_residual_dropout_backward},
      {"residual_layernorm_forward", BM_residual_layernorm_forward},
      {"glu_depthwise_conv1d_forward", BM_glu_depthwise_conv1d_forward},
      {"glu_depthwise_conv1d_backward", BM_glu_depthwise_conv1d_backward},
      {"log_softmax", BM_log_softmax},
      {"ctc_loss", BM_ctc_loss},
      {"adamw_step", BM_adamw_step},
      {"sum_squares", BM_sum_squares},
  };
  for (const auto& [name, function] : all) {
    benchmark::RegisterBenchmark(name, function)->UseManualTime()->Unit(benchmark::kMicrosecond);
  }
}

}  // namespace
}  // namespace mpiasr

int main(int argc, char** argv) {
  const bool list_requested = mpiasr::benchmark_list_requested(argc, argv);
  benchmark::Initialize(&argc, argv);
  mpiasr::register_benchmarks();
  if (mpiasr::list_or_skip("cuda_ops_bench", list_requested)) return 0;
  mpiasr::CudaBackend<__half> backend(mpiasr::CudaBackendOptions{.arena_bytes = size_t(16) << 30});
  mpiasr::g_backend = &backend;
  const mpiasr::CudaDeviceInfo& info = backend.device_info();
  benchmark::AddCustomContext("device", info.name);
  benchmark::AddCustomContext("peak_fp16_tflops", std::to_string(info.peak_fp16_tflops));
  benchmark::AddCustomContext("peak_memory_gbps", std::to_string(info.peak_memory_gbps));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
