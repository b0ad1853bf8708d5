// Microbenchmarks of the CUDA backend's operations at the shapes of `medium`
// (d 256, 4 heads, depthwise kernel 31) on a batch of 32 utterances of 15 s
// (1500 frames, 375 after subsampling), vocabulary 256, through CudaBackend;
// before Google Benchmark's flags, --batch=N takes N utterances and
// --frames=F utterances of F frames (F / 4 after subsampling, F / 10 tokens),
// and --parameters=N the optimizer's benchmarks over N parameters (default
// 30 Mi, about medium's count).
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

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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

// Batch g_batch x g_frames of medium (--batch, --frames), g_time after subsampling.
constexpr int kD = 256, kH = 4, kDh = kD / kH, kKernel = 31, kV = 256;
constexpr int kMels = 80, kChannels = 256;
int g_batch = 32, g_frames = 1500, g_time = g_frames / 4, g_rows = g_batch * g_time;
size_t g_parameters = size_t(30) << 20;  // --parameters

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
  Half inp(size_t(g_rows) * kD), w(size_t(4) * kD * kD), b(4 * kD), out(size_t(g_rows) * 4 * kD);
  run(state, 0, 2.0 * g_rows * kD * 4 * kD, [&] {
    g_backend->linear_forward(out.get(), inp.get(), w.get(), b.get(), g_rows, kD, 4 * kD);
  });
}

void BM_linear_backward_ffn1(benchmark::State& state) {
  Half inp(size_t(g_rows) * kD), w(size_t(4) * kD * kD), dout(size_t(g_rows) * 4 * kD);
  Half dinp(size_t(g_rows) * kD);
  Float dw(size_t(4) * kD * kD), db(4 * kD);
  run(state, 0, 4.0 * g_rows * kD * 4 * kD, [&] {
    g_backend->linear_backward(dinp.get(), dw.get(), db.get(), dout.get(), inp.get(), w.get(),
                               g_rows, kD, 4 * kD);
  });
}

std::vector<int32_t> full_lengths() {
  return std::vector<int32_t>(g_batch, g_time);
}

// Fused attention on tensor cores; flops of the score and context products
// (4 B H T^2 Dh), backward 10 B H T^2 Dh (the scores and dP computed in both
// of its kernels, dV, dQ, dK).
void BM_attention_forward(benchmark::State& state) {
  const size_t n = size_t(g_rows) * kD;
  Half qkv(3 * n), out(n);
  Float lse(size_t(g_batch) * kH * g_time);
  const std::vector<int32_t> lengths = full_lengths();
  run(state, 0, 4.0 * g_batch * kH * g_time * g_time * kDh, [&] {
    g_backend->attention_forward(out.get(), lse.get(), qkv.get(), lengths.data(), g_batch, g_time,
                                 kH, kDh, 0.125f);
  });
}

void BM_attention_backward(benchmark::State& state) {
  const size_t n = size_t(g_rows) * kD;
  Half qkv(3 * n), out(n), dout(n), dqkv(3 * n);
  Float lse(size_t(g_batch) * kH * g_time);
  const std::vector<int32_t> lengths = full_lengths();
  g_backend->attention_forward(out.get(), lse.get(), qkv.get(), lengths.data(), g_batch, g_time, kH,
                               kDh, 0.125f);
  run(state, 0, 10.0 * g_batch * kH * g_time * g_time * kDh, [&] {
    g_backend->attention_backward(dqkv.get(), dout.get(), out.get(), lse.get(), qkv.get(),
                                  lengths.data(), g_batch, g_time, kH, kDh, 0.125f);
  });
}

// The subsampling's second convolution: C -> C channels on [B, (F - 1) / 2, 39].
void BM_conv2d_forward(benchmark::State& state) {
  const int H = (g_frames - 1) / 2, W = (kMels - 1) / 2, Ho = (H - 3) / 2 + 1, Wo = (W - 3) / 2 + 1;
  const int B = std::max(1, g_batch / 2);
  Half inp(size_t(B) * H * W * kChannels), w(size_t(kChannels) * kChannels * 9), b(kChannels);
  Half out(size_t(B) * Ho * Wo * kChannels);
  run(state, 0, 2.0 * B * Ho * Wo * kChannels * 9.0 * kChannels, [&] {
    g_backend->conv2d_forward(out.get(), inp.get(), w.get(), b.get(), B, kChannels, H, W, kChannels,
                              true);
  });
}

void BM_conv2d_backward(benchmark::State& state) {
  const int H = (g_frames - 1) / 2, W = (kMels - 1) / 2, Ho = (H - 3) / 2 + 1, Wo = (W - 3) / 2 + 1;
  const int B = std::max(1, g_batch / 2);
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
  const size_t n = size_t(g_rows) * kD;
  Half inp(n), w(kD), b(kD), out(n);
  Float mean(g_rows), rstd(g_rows);
  run(state, 2 * n * kHalf, 0, [&] {
    g_backend->layernorm_forward(out.get(), mean.get(), rstd.get(), inp.get(), w.get(), b.get(),
                                 g_rows, kD, 1e-5f);
  });
}

void BM_layernorm_backward(benchmark::State& state) {
  const size_t n = size_t(g_rows) * kD;
  Half inp(n), w(kD), dout(n), dinp(n);
  Float mean(g_rows), rstd(g_rows), dw(kD), db(kD);
  run(state, 4 * n * kHalf, 0, [&] {
    g_backend->layernorm_backward(dinp.get(), dw.get(), db.get(), dout.get(), inp.get(), w.get(),
                                  mean.get(), rstd.get(), g_rows, kD, true);
  });
}

void BM_swish_dropout_forward(benchmark::State& state) {
  const size_t n = size_t(g_rows) * 4 * kD;
  Half inp(n), out(n);
  run(state, 2 * n * kHalf, 0,
      [&] { g_backend->swish_dropout_forward(out.get(), inp.get(), 0.1f, 42, 0, n); });
}

void BM_residual_dropout_backward(benchmark::State& state) {
  const size_t n = size_t(g_rows) * kD;
  Half dx(n), dbranch(n);
  run(state, 2 * n * kHalf, 0,
      [&] { g_backend->residual_dropout_backward(dbranch.get(), dx.get(), 0.5f, 0.1f, 42, 0, n); });
}

// x = base + 1/2 Dropout(branch) and LN(x): reads base and branch, writes x and LN(x).
void BM_residual_layernorm_forward(benchmark::State& state) {
  const size_t n = size_t(g_rows) * kD;
  Half base(n), branch(n), w(kD), b(kD), x(n), out(n);
  Float mean(g_rows), rstd(g_rows);
  run(state, 4 * n * kHalf, 0, [&] {
    g_backend->residual_layernorm_forward(x.get(), out.get(), mean.get(), rstd.get(), base.get(),
                                          branch.get(), 0.5f, 0.1f, 42, 0, w.get(), b.get(), g_rows,
                                          kD, 1e-5f);
  });
}

// The conv module's GLU and depthwise convolution: reads the [rows, 2d]
// projection, writes [rows, d].
void BM_glu_depthwise_conv1d_forward(benchmark::State& state) {
  const size_t n = size_t(g_rows) * kD;
  Half inp(2 * n), w(size_t(kD) * kKernel), b(kD), out(n);
  const std::vector<int32_t> lengths = full_lengths();
  run(state, 3 * n * kHalf, 0, [&] {
    g_backend->glu_depthwise_conv1d_forward(out.get(), inp.get(), w.get(), b.get(), lengths.data(),
                                            g_batch, g_time, kD, kKernel);
  });
}

// Reads dout and the projection, writes the projection's gradient.
void BM_glu_depthwise_conv1d_backward(benchmark::State& state) {
  const size_t n = size_t(g_rows) * kD;
  Half inp(2 * n), w(size_t(kD) * kKernel), dout(n), dinp(2 * n);
  Float dw(size_t(kD) * kKernel), db(kD);
  const std::vector<int32_t> lengths = full_lengths();
  run(state, 5 * n * kHalf, 0, [&] {
    g_backend->glu_depthwise_conv1d_backward(dinp.get(), dw.get(), db.get(), dout.get(), inp.get(),
                                             w.get(), lengths.data(), g_batch, g_time, kD, kKernel);
  });
}

void BM_log_softmax(benchmark::State& state) {
  const size_t n = size_t(g_rows) * kV;
  Half logits(n);
  Float logprobs(n);
  run(state, n * (kHalf + kFloat), 0,
      [&] { g_backend->log_softmax_forward(logprobs.get(), logits.get(), g_rows, kV); });
}

// CTC on log-probs of random logits, g_frames / 10 tokens per utterance; GB/s counts the
// log-probs read and the gradient written once (the recursions add more).
void BM_ctc_loss(benchmark::State& state) {
  const size_t n = size_t(g_rows) * kV;
  Half logits(n), dlogits(n);
  Float logprobs(n);
  g_backend->log_softmax_forward(logprobs.get(), logits.get(), g_rows, kV);
  const int L = g_frames / 10;
  std::vector<int32_t> targets(size_t(g_batch) * L), target_lengths(g_batch, L),
      input_lengths(g_batch, g_time);
  for (size_t i = 0; i < targets.size(); ++i) targets[i] = 1 + int32_t((i * 7919) % (kV - 1));
  std::vector<double> grad_scale(g_batch, 1.0);
  Buffer<double> losses(g_batch);
  run(state, n * (kFloat + kHalf), 0, [&] {
    g_backend->ctc_loss(losses.get(), dlogits.get(), logprobs.get(), targets.data(),
                        target_lengths.data(), input_lengths.data(), grad_scale.data(), nullptr,
                        nullptr, g_batch, g_time, kV);
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
  Float w(g_parameters), g(g_parameters), m(g_parameters), v(g_parameters);
  Half w_act(g_parameters);
  StepControl* control = decided_control();
  // 500 segments with decay on every other, about as many as the runs of
  // weights and of other tensors in the presets: the kernel's search included.
  constexpr size_t kSegments = 500;
  std::vector<AdamWSegment> segments(kSegments);
  for (size_t s = 0; s < kSegments; ++s) {
    const size_t begin = g_parameters * s / kSegments, end = g_parameters * (s + 1) / kSegments;
    segments[s] = {begin, end - begin, begin, s % 2 ? 0.0f : 1e-3f};
  }
  Buffer<AdamWSegment> d_segments(kSegments);
  g_backend->to_device(d_segments.get(), segments.data(), kSegments * sizeof(AdamWSegment));
  // w, m, v read and written, g read, the half copy written.
  run(state, g_parameters * (7 * kFloat + kHalf), 0, [&] {
    g_backend->adamw_step(w.get(), w_act.get(), g.get(), m.get(), v.get(), d_segments.get(),
                          int(kSegments), g_parameters, AdamWHyper{0.9f, 0.98f, 1e-9f}, control);
  });
}

void BM_sum_squares(benchmark::State& state) {
  Float g(g_parameters);
  Buffer<double> sum(1);
  run(state, g_parameters * kFloat, 0,
      [&] { g_backend->add_sum_squares(sum.get(), g.get(), g_parameters); });
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
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--batch=", 8) == 0) {
      mpiasr::g_batch = std::max(1, std::atoi(argv[i] + 8));
    } else if (std::strncmp(argv[i], "--frames=", 9) == 0) {
      mpiasr::g_frames = std::max(100, std::atoi(argv[i] + 9));
    } else if (std::strncmp(argv[i], "--parameters=", 13) == 0) {
      mpiasr::g_parameters = std::max<size_t>(1000, std::strtoull(argv[i] + 13, nullptr, 10));
    } else {
      rest.push_back(argv[i]);
    }
  }
  mpiasr::g_time = mpiasr::g_frames / 4;
  mpiasr::g_rows = mpiasr::g_batch * mpiasr::g_time;
  int rest_count = int(rest.size());
  const bool list_requested = mpiasr::benchmark_list_requested(rest_count, rest.data());
  benchmark::Initialize(&rest_count, rest.data());
  mpiasr::register_benchmarks();
  if (mpiasr::list_or_skip("cuda_ops_bench", list_requested)) return 0;
  // 3 GiB holds the largest benchmark's buffers (conv2d's at 32 utterances
  // with its im2col chunk, about 0.7 GB) and fits the emulator's 4 GiB.
  mpiasr::CudaBackend<__half> backend(mpiasr::CudaBackendOptions{.arena_bytes = size_t(3) << 30});
  mpiasr::g_backend = &backend;
  const mpiasr::CudaDeviceInfo& info = backend.device_info();
  benchmark::AddCustomContext("device", info.name);
  benchmark::AddCustomContext("peak_fp16_tflops", std::to_string(info.peak_fp16_tflops));
  benchmark::AddCustomContext("peak_memory_gbps", std::to_string(info.peak_memory_gbps));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
