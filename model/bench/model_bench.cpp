// Training speed of the whole Conformer-CTC model on the CPU backend in fp32:
// one batch of 16 utterances of 4 s (400 frames of 80 mels, 99 frames after
// subsampling, 30 target tokens of a 256-token vocabulary), for the tiny and
// small presets on 1 and 2 threads (the second argument).
//
//   fwd_bwd     forward + backward (Conformer::forward_backward)
//   step        forward + backward + global norm + clip + AdamW, as a trainer
//               runs it (the PyTorch peer's figure in
//               /work/shared/notes/cpu-performance.md is for this: ~115
//               audio-seconds/s on 2 threads, ~90 on 1, for `small`)
//
// Counters: input frames/s, audio_s/s (seconds of audio per second, 100
// frames per second of audio), GFLOP/s from an analytic count (2 flops per
// multiply-add; every matrix product and convolution of forward and backward;
// elementwise work not counted) and peak_frac, the ratio to a plain OpenBLAS
// sgemm 2048^3 measured here on the same number of threads. The context
// names the kernel OpenBLAS runs (openblas_corename).
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <chrono>
#include <map>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "model/conformer.h"
#include "model/optimizer.h"

namespace mpiasr {
namespace {

constexpr int kBatch = 16, kFrames = 400, kTokens = 30, kVocab = 256;

// FLOPs of one forward pass (2 per multiply-add) on B utterances of T frames.
double forward_flops(const ConformerConfig& c, int B, int T) {
  const double d = c.d_model, f = double(c.ff_mult) * c.d_model, C = c.subsampling_channels;
  const double T1 = (T - 1) / 2, F1 = (c.n_mels - 1) / 2;
  const double T2 = subsampled_frames(T), F2 = subsampled_bins(c.n_mels);
  const double rows = B * T2, Dh = d / c.n_heads;
  const double conv0 = 2.0 * B * T1 * F1 * C * 9;
  const double conv1 = 2.0 * B * T2 * F2 * C * C * 9;
  const double sub_linear = 2.0 * rows * F2 * C * d;
  const double ffn = 2.0 * (2.0 * rows * d * f * 2);
  const double attention =
      2.0 * rows * d * 3 * d + 2.0 * 2.0 * B * c.n_heads * T2 * T2 * Dh + 2.0 * rows * d * d;
  const double conv_module =
      2.0 * rows * d * 2 * d + 2.0 * rows * d * c.conv_kernel + 2.0 * rows * d * d;
  const double head = 2.0 * rows * d * c.vocab_size;
  return conv0 + conv1 + sub_linear + c.n_layers * (ffn + attention + conv_module) + head;
}

// Forward + backward: backward computes two products per forward product (the
// input gradient and the weight gradient), except the first convolution,
// whose input gradient is not needed.
double forward_backward_flops(const ConformerConfig& c, int B, int T) {
  const double conv0 = 2.0 * B * ((T - 1) / 2) * ((c.n_mels - 1) / 2) * c.subsampling_channels * 9;
  return 3.0 * forward_flops(c, B, T) - conv0;
}

// OpenBLAS sgemm 2048^3 on its own pool of `threads` threads, GFLOP/s (best of 3).
double sgemm_peak_gflops(int threads) {
  static std::map<int, double> measured;
  if (measured.count(threads)) return measured[threads];
  const int n = 2048;
  std::vector<float> a(size_t(n) * n, 0.5f), b(size_t(n) * n, 0.25f), c(size_t(n) * n);
  openblas_set_num_threads(threads);
  double best = 0.0;
  for (int rep = 0; rep < 4; ++rep) {
    auto start = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.0f, a.data(), n, b.data(), n,
                0.0f, c.data(), n);
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (rep > 0) best = std::max(best, 2.0 * n * n * n / seconds * 1e-9);
  }
  openblas_set_num_threads(1);
  return measured[threads] = best;
}

Batch realistic_batch() {
  Batch batch;
  batch.batch_size = kBatch;
  batch.max_frames = kFrames;
  batch.n_mels = 80;
  batch.features.resize(size_t(kBatch) * kFrames * 80);
  batch.frame_lengths.resize(kBatch);
  batch.target_lengths.resize(kBatch);
  batch.targets.resize(size_t(kBatch) * kTokens);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  for (size_t i = 0; i < batch.features.size(); ++i) batch.features[i] = normal(rng);
  for (int b = 0; b < kBatch; ++b) {
    batch.frame_lengths[size_t(b)] = kFrames;
    batch.target_lengths[size_t(b)] = kTokens;
  }
  for (size_t i = 0; i < batch.targets.size(); ++i)
    batch.targets[i] = 1 + int32_t(rng() % (kVocab - 1));
  return batch;
}

void run(benchmark::State& state, const char* preset, bool optimizer_step) {
  const int threads = int(state.range(0));
  const double peak = sgemm_peak_gflops(threads);
  CpuBackend<float> backend(threads);
  ConformerConfig config = conformer_preset(preset);
  config.vocab_size = kVocab;
  Conformer<float, float> model(backend, config, kBatch, kFrames, 1);
  Optimizer<float, float> optimizer(model.params());
  const Batch batch = realistic_batch();
  uint64_t step = 0;
  for (auto _ : state) {
    optimizer.zero_grad();
    std::vector<double> losses =
        model.forward_backward(batch, kBatch * kTokens, 1.0f, true, ++step);
    benchmark::DoNotOptimize(losses.data());
    if (optimizer_step) {
      optimizer.clip(5.0, optimizer.global_grad_norm());
      optimizer.step(1e-4f, 1.0f);
    }
  }
  const double flops = forward_backward_flops(config, kBatch, kFrames);
  using benchmark::Counter;
  state.counters["frames/s"] = Counter(kBatch * kFrames, Counter::kIsIterationInvariantRate);
  state.counters["audio_s/s"] =
      Counter(kBatch * kFrames / 100.0, Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = Counter(flops * 1e-9, Counter::kIsIterationInvariantRate);
  state.counters["peak_frac"] = Counter(flops * 1e-9 / peak, Counter::kIsIterationInvariantRate);
  state.counters["sgemm_peak"] = peak;
  state.counters["GFLOP/step"] = flops * 1e-9;
  state.counters["params_M"] = double(model.params().num_parameters()) * 1e-6;
}

void BM_tiny_fwd_bwd(benchmark::State& state) {
  run(state, "tiny", false);
}
void BM_small_fwd_bwd(benchmark::State& state) {
  run(state, "small", false);
}
void BM_small_step(benchmark::State& state) {
  run(state, "small", true);
}

BENCHMARK(BM_tiny_fwd_bwd)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_small_fwd_bwd)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(BM_small_step)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace mpiasr

int main(int argc, char** argv) {
  benchmark::AddCustomContext("openblas_corename", openblas_get_corename());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
