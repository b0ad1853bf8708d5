// Training throughput of the Conformer-CTC model on one GPU in fp16-mixed
// (CudaBackend: fp16 activations, fp32 masters, dynamic loss scaling): one
// optimizer step per iteration as the trainer queues it (zero_grad, the
// step's inputs, forward_backward with the device loss scale, the gradient's
// sum of squares, the norm, loss-scaler and clip decision and AdamW on the
// device; the host waits for the device once, at the end of the run, as the
// trainer does at its progress lines), on a synthetic batch of 32 utterances
// of 15 s (1500 frames
// of 80 mels, N(0, 1) features; 150 random tokens of a 128-token vocabulary)
// with dropout 0.1. Data loading is not included: it runs on CPU threads
// beside the GPU in training.
//
// Counters: audio_s/s (seconds of audio per second), TFLOP/s from the analytic
// count forward_backward_flops (model/presets.h: 2 flops per multiply-add of
// every matrix product and convolution of forward and backward; elementwise
// work not counted) and
// MFU, its ratio to the device's dense fp16 tensor-core peak; launches/step
// and host_waits/step (kernels/cuda/call_counts.h); parameters, the model's.
// Run twice: train_step queues forward and backward eagerly, train_step_graphs
// as a step graph (training.cuda_graphs), captured in the warm-up and
// replayed; each for --seconds.
//
// Flags (before Google Benchmark's): --preset=NAME (default medium),
// --seconds=S (default 10): each run lasts about S seconds, after 4 warm-up
// steps that also size the iteration count; --batch=N utterances and
// --frames=F frames each (default 32 and 1500; F / 10 tokens each);
// --profile-step: after the warm-up, one eager step between cudaProfilerStart
// and cudaProfilerStop (what `ncu --profile-from-start off` profiles), its
// launches printed, and no benchmark run. Without a CUDA device it prints
// SKIP, or lists its benchmark, and exits 0 (kernels/bench/cuda_bench_skip.h).
#include <benchmark/benchmark.h>
#include <cuda_fp16.h>
#include <cuda_profiler_api.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "kernels/bench/cuda_bench_skip.h"
#include "kernels/cuda/call_counts.h"
#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.h"
#include "model/bench/gpu_bench_batch.h"
#include "model/conformer.h"
#include "model/loss_scaler.h"
#include "model/optimizer.h"

namespace mpiasr {
namespace {

// One training step, queued without waiting for the device; with `graphs`,
// forward and backward as a step graph (training.cuda_graphs).
void train_step(CudaBackend<__half>& backend, Conformer<__half, float>& model,
                Optimizer<__half, float>& optimizer, const LossScaler& scaler,
                const HostBatch& batch, uint64_t step, bool graphs) {
  optimizer.zero_grad();
  optimizer.set_step_inputs(double(batch.targets.size()), 1e-4f);
  StepControl* control = optimizer.control();
  const auto queue = [&] {
    model.forward_backward(batch, 1.0, &control->scaler.scale, true, step, &control->loss_sum);
  };
  if (graphs) {
    backend.queue_as_graph(queue);
  } else {
    queue();
  }
  optimizer.add_grad_sum_squares();
  optimizer.decide(scaler.rule());
  optimizer.step();
}

struct Setup {
  std::string preset = "medium";
  double seconds = 10.0;
  int batch = 32, frames = 1500;
  bool profile_step = false;
};

// What one run trains, made once a device is known to be there.
struct TrainRun {
  std::unique_ptr<CudaBackend<__half>> backend;
  std::unique_ptr<Conformer<__half, float>> model;
  std::unique_ptr<Optimizer<__half, float>> optimizer;
  LossScaler scaler;
  HostBatch batch;
};

void BM_train_step(benchmark::State& state, TrainRun* run, const Setup& setup, bool graphs) {
  uint64_t step = 100;
  int64_t done = 0;
  run->optimizer->clear_sums();
  reset_cuda_call_counts();
  StepControl control;
  for (auto _ : state) {
    train_step(*run->backend, *run->model, *run->optimizer, run->scaler, run->batch, ++step,
               graphs);
    // The one wait, inside the timed loop.
    if (++done == int64_t(state.max_iterations)) control = run->optimizer->read_control();
  }
  const CudaCallCounts counts = cuda_call_counts();
  const double flops = forward_backward_flops(run->model->config(), setup.batch, setup.frames);
  const double audio_seconds = setup.batch * setup.frames / kFramesPerSecond;  // per batch
  const CudaDeviceInfo& info = run->backend->device_info();
  state.counters["audio_s/s"] =
      benchmark::Counter(audio_seconds, benchmark::Counter::kIsIterationInvariantRate);
  state.counters["TFLOP/s"] =
      benchmark::Counter(flops * 1e-12, benchmark::Counter::kIsIterationInvariantRate);
  if (info.peak_fp16_tflops > 0) {
    state.counters["MFU"] = benchmark::Counter(flops * 1e-12 / info.peak_fp16_tflops,
                                               benchmark::Counter::kIsIterationInvariantRate);
  }
  state.counters["skipped_steps"] = control.skipped;
  state.counters["parameters"] = double(run->model->params().num_parameters());
  state.counters["launches/step"] = double(counts.launches) / double(done);
  state.counters["host_waits/step"] = double(counts.host_waits) / double(done);
  state.counters["graph_launches/step"] = double(counts.graph_launches) / double(done);
  state.SetLabel(setup.preset + ", batch " + std::to_string(setup.batch) + " x " +
                 std::to_string(setup.frames) + " frames, " +
                 std::to_string(run->model->params().num_parameters() / 1000000) + " M parameters");
}

}  // namespace
}  // namespace mpiasr

int main(int argc, char** argv) {
  using namespace mpiasr;
  Setup setup;
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    if (std::strncmp(argv[i], "--preset=", 9) == 0) {
      setup.preset = argv[i] + 9;
    } else if (std::strncmp(argv[i], "--seconds=", 10) == 0) {
      setup.seconds = std::atof(argv[i] + 10);
    } else if (std::strncmp(argv[i], "--batch=", 8) == 0) {
      setup.batch = std::max(1, std::atoi(argv[i] + 8));
    } else if (std::strncmp(argv[i], "--frames=", 9) == 0) {
      setup.frames = std::max(100, std::atoi(argv[i] + 9));
    } else if (std::strcmp(argv[i], "--profile-step") == 0) {
      setup.profile_step = true;
    } else {
      rest.push_back(argv[i]);
    }
  }
  int rest_count = int(rest.size());
  const bool list_requested = benchmark_list_requested(rest_count, rest.data());
  benchmark::Initialize(&rest_count, rest.data());
  TrainRun run;
  std::vector<benchmark::internal::Benchmark*> registered;
  for (const bool graphs : {false, true}) {
    const std::string name = (graphs ? "train_step_graphs/" : "train_step/") + setup.preset;
    registered.push_back(
        benchmark::RegisterBenchmark(name.c_str(), BM_train_step, &run, setup, graphs)
            ->UseRealTime()
            ->Unit(benchmark::kMillisecond));
  }
  if (list_or_skip("cuda_train_bench", list_requested)) return 0;

  run.backend = std::make_unique<CudaBackend<__half>>();
  ConformerConfig config = conformer_preset(setup.preset);
  config.vocab_size = kVocab;
  run.model = std::make_unique<Conformer<__half, float>>(*run.backend, config, setup.batch,
                                                         setup.frames, 1);
  AdamWConfig adamw;
  adamw.clip_norm = 5.0;
  run.optimizer = std::make_unique<Optimizer<__half, float>>(run.model->params(), adamw);
  run.optimizer->set_state(0, run.scaler.loss_scaler_state());
  run.batch = synthetic_batch(setup.batch, setup.frames, 7);

  // Warm-up (the scratch buffers grow, cuBLAS picks its kernels), then size the run.
  // The graph is captured in the warm-up too.
  for (uint64_t step = 0; step < 3; ++step) {
    train_step(*run.backend, *run.model, *run.optimizer, run.scaler, run.batch, step, step == 2);
  }
  run.optimizer->read_control();
  const auto start = std::chrono::steady_clock::now();
  train_step(*run.backend, *run.model, *run.optimizer, run.scaler, run.batch, 3, false);
  run.optimizer->read_control();
  const double step_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (setup.profile_step) {
    reset_cuda_call_counts();
    CUDA_CHECK(cudaProfilerStart());
    train_step(*run.backend, *run.model, *run.optimizer, run.scaler, run.batch, 4, false);
    run.optimizer->read_control();
    CUDA_CHECK(cudaProfilerStop());
    std::printf("profiled step: train_step/%s, %llu launches (a cuBLASLt matmul counts one)\n",
                setup.preset.c_str(), static_cast<unsigned long long>(cuda_call_counts().launches));
    return 0;
  }
  for (benchmark::internal::Benchmark* benchmark : registered) {
    benchmark->Iterations(benchmark::IterationCount(std::max(1.0, setup.seconds / step_seconds)));
  }

  benchmark::AddCustomContext("device", run.backend->device_info().name);
  benchmark::AddCustomContext("peak_fp16_tflops",
                              std::to_string(run.backend->device_info().peak_fp16_tflops));
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
