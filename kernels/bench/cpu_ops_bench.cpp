// Microbenchmarks of the CPU backend's operations at Conformer shapes (batch
// 16 of 4 s: 400 frames of 80 mels, 100 frames after subsampling; d = 144 or
// 256, 4 heads, depthwise kernel 31), each on 1 and 2 threads (the argument).
// Counters: GFLOP/s for GEMM-like ops (2 flops per multiply-add), GB/s (bytes
// read + written once) for memory-bound ops. A plain OpenBLAS sgemm 2048^3 on
// its own threads gives the machine's ceiling for the kernel OpenBLAS picked
// (printed as openblas_corename in the context). The mpiasr program runs with
// the OpenMP wait settings that `mpiasr --version` names (src/main.cpp); set
// them here too for comparable figures (the context shows those in effect).
#include <benchmark/benchmark.h>
#include <cblas.h>
#include <omp.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <thread>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm.h"

namespace mpiasr {
namespace {

std::vector<float> random_floats(size_t n, uint64_t seed = 1) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

void set_flops(benchmark::State& state, double flops_per_iteration) {
  state.counters["GFLOP/s"] =
      benchmark::Counter(flops_per_iteration * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

void set_bytes(benchmark::State& state, double bytes_per_iteration) {
  state.counters["GB/s"] =
      benchmark::Counter(bytes_per_iteration * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

int threads(const benchmark::State& state) {
  return int(state.range(0));
}

// ---- GEMM ----------------------------------------------------------------------

// OpenBLAS alone, on its own thread pool: the ceiling.
void BM_openblas_sgemm_2048(benchmark::State& state) {
  const int n = 2048;
  const auto a = random_floats(size_t(n) * n, 1), b = random_floats(size_t(n) * n, 2);
  std::vector<float> c(size_t(n) * n);
  openblas_set_num_threads(threads(state));
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
    benchmark::DoNotOptimize(c.data());
  }
  openblas_set_num_threads(1);
  // Its workers poll a while longer; the next benchmark gets the cores free.
  if (threads(state) > 1) std::this_thread::sleep_for(openblas_worker_poll_time());
  set_flops(state, 2.0 * n * n * n);
}

// The backend's GEMM: panels on the OpenMP team, OpenBLAS on one thread each.
void BM_gemm_2048(benchmark::State& state) {
  const int n = 2048;
  omp_set_num_threads(threads(state));
  const auto a = random_floats(size_t(n) * n, 1), b = random_floats(size_t(n) * n, 2);
  std::vector<float> c(size_t(n) * n);
  for (auto _ : state) {
    cpu_gemm<float>(false, false, n, n, n, 1.0f, a.data(), n, 0, b.data(), n, 0, 0.0f, c.data(), n,
                    0, 1);
    benchmark::DoNotOptimize(c.data());
  }
  set_flops(state, 2.0 * n * n * n);
}

// ---- linear (FFN up-projection: M = B*T = 1600, d -> 4d) -------------------------

void BM_linear_forward(benchmark::State& state) {
  const int M = 1600, K = int(state.range(1)), N = 4 * K;
  CpuBackend<float> backend(threads(state));
  const auto x = random_floats(size_t(M) * K, 1), w = random_floats(size_t(N) * K, 2),
             b = random_floats(N, 3);
  std::vector<float> y(size_t(M) * N);
  for (auto _ : state) {
    backend.linear_forward(y.data(), x.data(), w.data(), b.data(), M, K, N);
    benchmark::DoNotOptimize(y.data());
  }
  set_flops(state, 2.0 * M * N * K);
}

void BM_linear_backward(benchmark::State& state) {
  const int M = 1600, K = int(state.range(1)), N = 4 * K;
  CpuBackend<float> backend(threads(state));
  const auto x = random_floats(size_t(M) * K, 1), w = random_floats(size_t(N) * K, 2),
             dy = random_floats(size_t(M) * N, 3);
  std::vector<float> dx(size_t(M) * K), dw(size_t(N) * K), db(N);
  for (auto _ : state) {
    backend.linear_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(), M, K,
                            N);
    benchmark::DoNotOptimize(dx.data());
  }
  set_flops(state, 4.0 * M * N * K);
}

// ---- conv2d subsampling ------------------------------------------------------------

// Arguments: threads, layer (1: 1 -> 144 channels on 400 x 80; 2: 144 -> 144 on 199 x 39).
// GFLOP/s counts the direct convolution's products, also where the Winograd
// transform (conv2d_winograd.h) does 0.60 of them.
struct ConvShape {
  int B, Cin, H, W, Cout;
  int Ho() const { return (H - 3) / 2 + 1; }
  int Wo() const { return (W - 3) / 2 + 1; }
  double flops() const { return 2.0 * B * Ho() * Wo() * Cout * Cin * 9; }
};

ConvShape conv_shape(const benchmark::State& state) {
  return state.range(1) == 1 ? ConvShape{16, 1, 400, 80, 144} : ConvShape{16, 144, 199, 39, 144};
}

void BM_conv2d_forward(benchmark::State& state) {
  const ConvShape s = conv_shape(state);
  CpuBackend<float> backend(threads(state));
  const auto x = random_floats(size_t(s.B) * s.H * s.W * s.Cin, 1),
             w = random_floats(size_t(s.Cout) * s.Cin * 9, 2), b = random_floats(s.Cout, 3);
  std::vector<float> y(size_t(s.B) * s.Ho() * s.Wo() * s.Cout);
  for (auto _ : state) {
    backend.conv2d_forward(y.data(), x.data(), w.data(), b.data(), s.B, s.Cin, s.H, s.W, s.Cout,
                           true);
    benchmark::DoNotOptimize(y.data());
  }
  set_flops(state, s.flops());
}

void BM_conv2d_backward(benchmark::State& state) {
  const ConvShape s = conv_shape(state);
  CpuBackend<float> backend(threads(state));
  const auto x = random_floats(size_t(s.B) * s.H * s.W * s.Cin, 1),
             w = random_floats(size_t(s.Cout) * s.Cin * 9, 2),
             dy = random_floats(size_t(s.B) * s.Ho() * s.Wo() * s.Cout, 3);
  std::vector<float> dw(w.size()), db(s.Cout);
  // The weight and bias gradients only, as the model asks them: the first
  // layer's input is the features, and the second layer's input gradient is
  // part of BM_subsampling_first_conv_backward.
  for (auto _ : state) {
    backend.conv2d_backward(nullptr, dw.data(), db.data(), dy.data(), x.data(), w.data(), s.B,
                            s.Cin, s.H, s.W, s.Cout);
    benchmark::DoNotOptimize(dw.data());
  }
  set_flops(state, s.flops());
}

// The first layer's gradients through the second layer and the ReLU (the
// subsampling's input side), at the `small` shapes: fused (argument 1: da1 is
// never stored) against the three steps it replaces (0: conv2d input gradient,
// ReLU backward, conv2d weight gradient), in one process. GFLOP/s counts the
// two GEMM-like products.
void BM_subsampling_first_conv_backward(benchmark::State& state) {
  const ConvShape first{16, 1, 400, 80, 144};
  const ConvShape second{16, 144, first.Ho(), first.Wo(), 144};
  const bool fused = state.range(1) == 1;
  CpuBackend<float> backend(threads(state));
  const auto x = random_floats(size_t(first.B) * first.H * first.W, 1),
             w0 = random_floats(size_t(first.Cout) * 9, 2), b0 = random_floats(first.Cout, 3),
             w2 = random_floats(size_t(second.Cout) * second.Cin * 9, 4),
             dout2 = random_floats(size_t(second.B) * second.Ho() * second.Wo() * second.Cout, 5);
  std::vector<float> a1(size_t(second.B) * second.H * second.W * second.Cin), da1(a1.size());
  backend.conv2d_forward(a1.data(), x.data(), w0.data(), b0.data(), first.B, 1, first.H, first.W,
                         first.Cout, true);
  std::vector<float> dw0(w0.size()), db0(b0.size());
  for (auto _ : state) {
    if (fused) {
      backend.subsampling_first_conv_backward(dw0.data(), db0.data(), dout2.data(), a1.data(),
                                              x.data(), w2.data(), first.B, first.H, first.W,
                                              first.Cout, da1.data());
    } else {
      backend.conv2d_backward(da1.data(), nullptr, nullptr, dout2.data(), a1.data(), w2.data(),
                              second.B, second.Cin, second.H, second.W, second.Cout);
      backend.relu_backward(da1.data(), da1.data(), a1.data(), da1.size());
      backend.conv2d_backward(nullptr, dw0.data(), db0.data(), da1.data(), x.data(), w0.data(),
                              first.B, 1, first.H, first.W, first.Cout);
    }
    benchmark::DoNotOptimize(dw0.data());
  }
  set_flops(state, second.flops() + first.flops());
}

// ---- memory-bound ops at B*T = 1600 rows ------------------------------------------------

void BM_layernorm_forward(benchmark::State& state) {
  const int N = 1600, C = int(state.range(1));
  CpuBackend<float> backend(threads(state));
  const auto x = random_floats(size_t(N) * C, 1), w = random_floats(C, 2), b = random_floats(C, 3);
  std::vector<float> y(size_t(N) * C), mean(N), rstd(N);
  for (auto _ : state) {
    backend.layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N,
                              C, 1e-5f);
    benchmark::DoNotOptimize(y.data());
  }
  set_bytes(state, 2.0 * N * C * sizeof(float));
}

void BM_layernorm_backward(benchmark::State& state) {
  const int N = 1600, C = int(state.range(1));
  CpuBackend<float> backend(threads(state));
  const auto x = random_floats(size_t(N) * C, 1), w = random_floats(C, 2),
             dy = random_floats(size_t(N) * C, 3);
  std::vector<float> y(size_t(N) * C), mean(N), rstd(N), dx(size_t(N) * C), dw(C), db(C);
  backend.layernorm_forward(y.data(), mean.data(), rstd.data(), x.data(), w.data(), nullptr, N, C,
                            1e-5f);
  for (auto _ : state) {
    backend.layernorm_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(),
                               mean.data(), rstd.data(), N, C, true);
    benchmark::DoNotOptimize(dx.data());
  }
  set_bytes(state, 4.0 * N * C * sizeof(float));  // read x, dy, dx; write dx
}

// Swish and the dropout after it on the FFN hidden layer [1600, 4d], p = 0.1.
void BM_swish_dropout_forward(benchmark::State& state) {
  const size_t n = size_t(1600) * 4 * state.range(1);
  CpuBackend<float> backend(threads(state));
  const auto x = random_floats(n, 1);
  std::vector<float> y(n);
  for (auto _ : state) {
    backend.swish_dropout_forward(y.data(), x.data(), 0.1f, 1, 0, n);
    benchmark::DoNotOptimize(y.data());
  }
  set_bytes(state, 2.0 * n * sizeof(float));
}

void BM_swish_dropout_backward(benchmark::State& state) {
  const size_t n = size_t(1600) * 4 * state.range(1);
  CpuBackend<float> backend(threads(state));
  const auto x = random_floats(n, 1), dy = random_floats(n, 2);
  std::vector<float> dx(n);
  for (auto _ : state) {
    backend.swish_dropout_backward(dx.data(), dy.data(), x.data(), 0.1f, 1, 0, n);
    benchmark::DoNotOptimize(dx.data());
  }
  set_bytes(state, 3.0 * n * sizeof(float));
}

// Dropout of a gradient [1600, 4d] (a residual branch's, scale 1).
void BM_residual_dropout_backward(benchmark::State& state) {
  const size_t n = size_t(1600) * 4 * state.range(1);
  CpuBackend<float> backend(threads(state));
  const auto x = random_floats(n, 1);
  std::vector<float> y(n);
  uint64_t seed = 0;
  for (auto _ : state) {
    backend.residual_dropout_backward(y.data(), x.data(), 1.0f, 0.1f, ++seed, 0, n);
    benchmark::DoNotOptimize(y.data());
  }
  set_bytes(state, 2.0 * n * sizeof(float));
  state.counters["Gelem/s"] =
      benchmark::Counter(double(n) * 1e-9, benchmark::Counter::kIsIterationInvariantRate);
}

// ---- attention: B = 16, T = 100, H = 4 ----------------------------------------------
// Flops: the score and context products, 4 B H T^2 Dh forward; backward
// recomputes the scores and adds dP, dV, dQ, dK: 10 B H T^2 Dh.

void BM_attention_forward(benchmark::State& state) {
  const int B = 16, T = 100, H = 4, Dh = int(state.range(1)) / H;
  const size_t n = size_t(B) * T * H * Dh;
  CpuBackend<float> backend(threads(state));
  const auto qkv = random_floats(3 * n, 1);
  const std::vector<int32_t> lengths(B, T);
  std::vector<float> out(n), lse(size_t(B) * H * T);
  for (auto _ : state) {
    backend.attention_forward(out.data(), lse.data(), qkv.data(), lengths.data(), B, T, H, Dh,
                              0.125f);
    benchmark::DoNotOptimize(out.data());
  }
  set_flops(state, 4.0 * B * H * T * T * Dh);
}

void BM_attention_backward(benchmark::State& state) {
  const int B = 16, T = 100, H = 4, Dh = int(state.range(1)) / H;
  const size_t n = size_t(B) * T * H * Dh;
  CpuBackend<float> backend(threads(state));
  const auto qkv = random_floats(3 * n, 1), dout = random_floats(n, 2);
  const std::vector<int32_t> lengths(B, T);
  std::vector<float> out(n), lse(size_t(B) * H * T), dqkv(3 * n);
  backend.attention_forward(out.data(), lse.data(), qkv.data(), lengths.data(), B, T, H, Dh,
                            0.125f);
  for (auto _ : state) {
    backend.attention_backward(dqkv.data(), dout.data(), out.data(), lse.data(), qkv.data(),
                               lengths.data(), B, T, H, Dh, 0.125f);
    benchmark::DoNotOptimize(dqkv.data());
  }
  set_flops(state, 10.0 * B * H * T * T * Dh);
}

// ---- GLU + depthwise conv1d: B = 16, T = 100, K = 31 ---------------------------------

void BM_glu_depthwise_conv1d_forward(benchmark::State& state) {
  const int B = 16, T = 100, C = int(state.range(1)), K = 31;
  CpuBackend<float> backend(threads(state));
  const auto x = random_floats(size_t(B) * T * 2 * C, 1), w = random_floats(size_t(C) * K, 2),
             b = random_floats(C, 3);
  std::vector<int32_t> lengths(B, T);
  std::vector<float> y(size_t(B) * T * C);
  for (auto _ : state) {
    backend.glu_depthwise_conv1d_forward(y.data(), x.data(), w.data(), b.data(), lengths.data(), B,
                                         T, C, K);
    benchmark::DoNotOptimize(y.data());
  }
  set_flops(state, 2.0 * B * T * C * K);
}

void BM_glu_depthwise_conv1d_backward(benchmark::State& state) {
  const int B = 16, T = 100, C = int(state.range(1)), K = 31;
  CpuBackend<float> backend(threads(state));
  const auto x = random_floats(size_t(B) * T * 2 * C, 1), w = random_floats(size_t(C) * K, 2),
             dy = random_floats(size_t(B) * T * C, 3);
  std::vector<int32_t> lengths(B, T);
  std::vector<float> dx(x.size()), dw(w.size()), db(C);
  for (auto _ : state) {
    backend.glu_depthwise_conv1d_backward(dx.data(), dw.data(), db.data(), dy.data(), x.data(),
                                          w.data(), lengths.data(), B, T, C, K);
    benchmark::DoNotOptimize(dx.data());
  }
  set_flops(state, 4.0 * B * T * C * K);
}

// ---- output head ------------------------------------------------------------------------

void BM_log_softmax_forward(benchmark::State& state) {
  const int N = 1600, V = 256;
  CpuBackend<float> backend(threads(state));
  const auto x = random_floats(size_t(N) * V, 1);
  std::vector<float> y(x.size());
  for (auto _ : state) {
    backend.log_softmax_forward(y.data(), x.data(), N, V);
    benchmark::DoNotOptimize(y.data());
  }
  set_bytes(state, 2.0 * N * V * sizeof(float));
}

// ---- AdamW and the sum of squares (the `small` model's 3.5 M parameters, fp32, no copy) ----

void BM_adamw_step(benchmark::State& state) {
  const size_t n = 3'533'730;
  omp_set_num_threads(threads(state));
  auto w = random_floats(n, 1), m = random_floats(n, 3), v = random_floats(n, 4);
  for (float& e : v) e *= e;
  const auto g = random_floats(n, 2);
  const AdamWCoefficients<float> c{1e-3f, 0.9f, 0.98f, 1e-9f, 1e-3f, 1.0f, 0.1f, 0.02f};
  for (auto _ : state) {
    cpu_adamw_step(w.data(), static_cast<float*>(nullptr), g.data(), m.data(), v.data(), n, c);
    benchmark::DoNotOptimize(w.data());
  }
  // w, m and v read and written, g read.
  set_bytes(state, 7.0 * n * sizeof(float));
}

// The global norm's sum of squares over the same gradient.
void BM_sum_squares(benchmark::State& state) {
  const size_t n = 3'533'730;
  omp_set_num_threads(threads(state));
  const auto g = random_floats(n, 2);
  for (auto _ : state) benchmark::DoNotOptimize(cpu_sum_squares(g.data(), n));
  set_bytes(state, double(n) * sizeof(float));
}

void thread_args(benchmark::internal::Benchmark* b) {
  b->Arg(1)->Arg(2);
}

// (threads, d_model)
void model_args(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2})
    for (int d : {144, 256}) b->Args({t, d});
}

// (threads, conv layer)
void conv_args(benchmark::internal::Benchmark* b) {
  for (int t : {1, 2})
    for (int layer : {1, 2}) b->Args({t, layer});
}

BENCHMARK(BM_openblas_sgemm_2048)->Apply(thread_args)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_gemm_2048)->Apply(thread_args)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_linear_forward)->Apply(model_args)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_linear_backward)->Apply(model_args)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_conv2d_forward)->Apply(conv_args)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_conv2d_backward)->Apply(conv_args)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_subsampling_first_conv_backward)
    ->ArgsProduct({{1, 2}, {0, 1}})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();
BENCHMARK(BM_layernorm_forward)->Apply(model_args)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_layernorm_backward)->Apply(model_args)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_swish_dropout_forward)
    ->Apply(model_args)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_swish_dropout_backward)
    ->Apply(model_args)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_residual_dropout_backward)
    ->Apply(model_args)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_attention_forward)->Apply(model_args)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_attention_backward)->Apply(model_args)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_glu_depthwise_conv1d_forward)
    ->Apply(model_args)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_glu_depthwise_conv1d_backward)
    ->Apply(model_args)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();
BENCHMARK(BM_log_softmax_forward)->Apply(thread_args)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_adamw_step)->Apply(thread_args)->Unit(benchmark::kMicrosecond)->UseRealTime();
BENCHMARK(BM_sum_squares)->Apply(thread_args)->Unit(benchmark::kMicrosecond)->UseRealTime();

}  // namespace
}  // namespace mpiasr

int main(int argc, char** argv) {
  benchmark::AddCustomContext("openblas_corename", openblas_get_corename());
  benchmark::AddCustomContext("openmp_waits", mpiasr::openmp_wait_settings());
  std::printf("OpenBLAS core: %s\n", openblas_get_corename());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
