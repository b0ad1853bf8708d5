// Training speed of the whole Conformer-CTC model on the CPU backend in fp32:
// one batch of 16 utterances of 4 s (400 frames of 80 mels, 99 frames after
// subsampling, 30 target tokens of a 256-token vocabulary), for the tiny and
// small presets on 1 and 2 threads (the second argument).
//
//   fwd_bwd     forward + backward (Conformer::forward_backward)
//   step        forward + backward + global norm + clip + AdamW, as a trainer
//               runs it (for comparison: on an AVX2 EPYC where this gave
//               43-45 audio-seconds/s on 1 thread and 63-70 on 2 for `small`,
//               PyTorch 2.15 with MKL and oneDNN ran the same step at 30-32
//               and 42-44)
//
// Counters: input frames/s, audio_s/s (seconds of audio per second, 100
// frames per second of audio), GFLOP/s of the FLOPs the step executes (2 a
// multiply-add of every matrix product and convolution of forward and
// backward; elementwise work not counted) and peak_frac, the ratio to a plain
// OpenBLAS sgemm 2048^3 on the same number of threads (sgemm_peak, GFLOP/s:
// the median of one sgemm run after every step, outside the timing).
// GFLOP/step is that executed count: forward_backward_flops (model/presets.h)
// counts every convolution at the direct product's multiply-adds
// (direct_GFLOP/step), and where the subsampling's conv.2 runs the Winograd
// transform (kernels/cpu/conv2d_winograd.h: AVX-512, channels a multiple of
// 16) its products are counted as the transform runs them instead
// (cpu_conv2d_float_multiply_adds), so that the share of the ceiling does not
// credit products never computed. The context names the kernel OpenBLAS runs
// (openblas_corename) and the OpenMP wait settings in effect: run it with
// those that `mpiasr --version` names (src/main.cpp), as
// scripts/bench-peer.sh does.
#include <benchmark/benchmark.h>
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>
#include <vector>

#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm.h"
#include "model/conformer.h"
#include "model/optimizer.h"

namespace mpiasr {
namespace {

constexpr int kBatch = 16, kFrames = 400, kTokens = 30, kVocab = 256;

// OpenBLAS sgemm 2048^3 on its own pool of `threads` threads: the machine's
// ceiling for the kernel OpenBLAS picked. measure() times one call.
class SgemmCeiling {
 public:
  explicit SgemmCeiling(int threads)
      : threads_(threads), a_(kElements, 0.5f), b_(kElements, 0.25f), c_(kElements) {
    measure();  // warm-up: first-touch, OpenBLAS's thread pool
  }

  // One sgemm; on more than one thread it then waits, untimed, until
  // OpenBLAS's workers sleep again: a step timed while they poll shares the
  // cores with them (on 2 threads that made the step 1.035x slower, median
  // of 5 alternations).
  double measure() {
    openblas_set_num_threads(threads_);
    const auto start = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, kN, kN, kN, 1.0f, a_.data(), kN,
                b_.data(), kN, 0.0f, c_.data(), kN);
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    openblas_set_num_threads(1);
    if (threads_ > 1) std::this_thread::sleep_for(openblas_worker_poll_time());
    return 2.0 * kN * kN * kN / seconds * 1e-9;
  }

 private:
  static constexpr int kN = 2048;
  static constexpr size_t kElements = size_t(kN) * kN;
  int threads_;
  std::vector<float> a_, b_, c_;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

HostBatch realistic_batch() {
  HostBatch batch;
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

// FLOPs of one forward + backward as the CPU backend executes it: the direct
// count of forward_backward_flops, with conv.2's forward, input gradient and
// weight gradient (each counted there at the direct product's B Ho Wo 9 C C
// multiply-adds) replaced by what the float kernels run for them here.
double executed_flops(const ConformerConfig& c) {
  const int C = c.subsampling_channels, H = (kFrames - 1) / 2, W = (c.n_mels - 1) / 2;
  const double direct = double(kBatch) * conv2d_out_size(H) * conv2d_out_size(W) * 9 * C * C;
  const Conv2dMultiplyAdds run = cpu_conv2d_float_multiply_adds(kBatch, C, H, W, C);
  return forward_backward_flops(c, kBatch, kFrames) - 2.0 * 3 * direct +
         2.0 * double(run.forward + run.input_grad + run.weight_grad);
}

void run(benchmark::State& state, const char* preset, bool optimizer_step) {
  const int threads = int(state.range(0));
  SgemmCeiling ceiling(threads);
  std::vector<double> ceiling_gflops;
  CpuBackend<float> backend(threads);
  ConformerConfig config = conformer_preset(preset);
  config.vocab_size = kVocab;
  Conformer<float, float> model(backend, config, kBatch, kFrames, 1);
  AdamWConfig adamw;
  adamw.clip_norm = 5.0;
  Optimizer<float, float> optimizer(model.params(), adamw);
  const HostBatch batch = realistic_batch();
  uint64_t step = 0;
  for (auto _ : state) {
    optimizer.zero_grad();
    std::vector<double> losses =
        model.forward_backward(batch, kBatch * kTokens, 1.0f, true, ++step);
    benchmark::DoNotOptimize(losses.data());
    if (optimizer_step) {
      optimizer.set_step_inputs(1.0, 1e-4f);
      optimizer.add_grad_sum_squares();
      optimizer.decide(LossScalerRule{});
      optimizer.step();
    }
    // The ceiling after every step, untimed, so that both see the machine in
    // the same state (a shared machine's speed drifts within seconds).
    state.PauseTiming();
    ceiling_gflops.push_back(ceiling.measure());
    state.ResumeTiming();
  }
  const double peak = median(ceiling_gflops);
  const double flops = executed_flops(config);
  using benchmark::Counter;
  state.counters["frames/s"] = Counter(kBatch * kFrames, Counter::kIsIterationInvariantRate);
  state.counters["audio_s/s"] =
      Counter(kBatch * kFrames / 100.0, Counter::kIsIterationInvariantRate);
  state.counters["GFLOP/s"] = Counter(flops * 1e-9, Counter::kIsIterationInvariantRate);
  state.counters["peak_frac"] = Counter(flops * 1e-9 / peak, Counter::kIsIterationInvariantRate);
  state.counters["sgemm_peak"] = peak;
  state.counters["GFLOP/step"] = flops * 1e-9;
  state.counters["direct_GFLOP/step"] = forward_backward_flops(config, kBatch, kFrames) * 1e-9;
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
  benchmark::AddCustomContext("openmp_waits", mpiasr::openmp_wait_settings());
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
