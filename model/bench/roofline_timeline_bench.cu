// The roofline timeline of one training step, for the step model
// (scripts/step-model.py --gpu): a fp16-mixed step of a preset on 32
// utterances of 15 s (the GPU benchmarks' batch, gpu_bench_batch.h) queued
// as the trainer queues it on the RooflineBackend (kernels/roofline_backend.h)
// with an H200's datasheet peaks. Nothing is computed and no GPU is needed.
//
// Prints one JSON object: the preset, its parameters, the gradient buffer's
// bytes (fp32, padded as the parameter store pads it), the audio seconds of
// the batch, the roofline bound (sum over operations of max(FLOPs / peak,
// bytes / bandwidth)) of forward + backward and of the optimizer in ms, and
// "ready": at every range backward reports final (on_grads_ready, last layer
// first), [the bytes at the buffer's end final so far, the bound of forward +
// backward queued until then in ms].
//
//   roofline_timeline_bench [--preset=NAME]   (default large)
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_device.h"
#include "kernels/roofline_backend.h"
#include "model/bench/gpu_bench_batch.h"
#include "model/conformer.h"
#include "model/loss_scaler.h"
#include "model/optimizer.h"
#include "model/presets.h"

namespace mpiasr {
namespace {

// Elements at the end of [0, size) covered by the ranges (offset, count).
size_t final_at_end(std::vector<std::pair<size_t, size_t>> ranges, size_t size) {
  std::sort(ranges.begin(), ranges.end(), [](const auto& a, const auto& b) { return a > b; });
  size_t begin = size;
  for (const auto& [offset, count] : ranges) {
    if (offset + count < begin) break;
    begin = std::min(begin, offset);
  }
  return size - begin;
}

int run(const std::string& preset) {
  const DatasheetPeaks h200 = datasheet_peaks("NVIDIA H200");
  RooflineBackend<__half, float> backend(h200.fp16_tflops * 1e12, h200.memory_gbps * 1e9);
  ConformerConfig config = conformer_preset(preset);
  config.vocab_size = kVocab;
  config.dropout = 0.1f;
  Conformer<__half, float> model(backend, config, kBatch, kFrames, 1);
  Optimizer<__half, float> optimizer(model.params(), AdamWConfig{});
  const LossScaler scaler{LossScalerConfig{}};
  const size_t size = model.params().size();

  optimizer.zero_grad();
  optimizer.set_step_inputs(double(kBatch) * kTokens, 1e-3f);
  StepControl* control = optimizer.control();
  backend.reset_tally();
  std::vector<std::pair<size_t, size_t>> ranges;
  std::string ready;
  const auto on_grads_ready = [&](size_t offset, size_t count) {
    ranges.emplace_back(offset, count);
    char point[64];
    std::snprintf(point, sizeof point, "%s[%zu, %.4f]", ready.empty() ? "" : ", ",
                  4 * final_at_end(ranges, size), backend.tally().bound_seconds * 1e3);
    ready += point;
  };
  model.forward_backward(synthetic_batch(kBatch, kFrames, 7), 1.0, &control->scaler.scale, true, 0,
                         &control->loss_sum, on_grads_ready);
  const double forward_backward_ms = backend.tally().bound_seconds * 1e3;
  backend.reset_tally();
  optimizer.add_grad_sum_squares();
  optimizer.decide(scaler.rule());
  optimizer.step();
  std::printf(
      "{\"preset\": \"%s\", \"parameters\": %zu, \"gradient_bytes\": %zu, \"audio_s\": %.1f, "
      "\"forward_backward_ms\": %.4f, \"optimizer_ms\": %.4f, \"ready\": [%s]}\n",
      preset.c_str(), model.params().num_parameters(), 4 * size, kAudioSeconds, forward_backward_ms,
      backend.tally().bound_seconds * 1e3, ready.c_str());
  return 0;
}

}  // namespace
}  // namespace mpiasr

int main(int argc, char** argv) {
  std::string preset = "large";
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--preset=", 9) == 0) {
      preset = argv[i] + 9;
    } else {
      std::fprintf(stderr, "roofline_timeline_bench: unknown argument '%s' (--preset=NAME)\n",
                   argv[i]);
      return 2;
    }
  }
  return mpiasr::run(preset);
}
