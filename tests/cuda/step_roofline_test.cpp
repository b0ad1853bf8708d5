// The analytic roofline of a training step (kernels/roofline_backend.h), for
// docs/gpu.md's figures: a fp16-mixed step of the Conformer on 32 utterances of
// 15 s (the GPU benchmark's batch, model/bench/cuda_train_bench.cu) as the
// trainer queues it, on the RooflineBackend with the GPU's types, so the
// activation arena is planned as on the GPU and nothing is computed.
//
// Checked: the matrix-product FLOPs the backend tallies over forward and
// backward equal the closed form forward_backward_flops (model/presets.h), an
// independent count, for several shapes and presets; the optimizer's part of
// the step moves the bytes AdamW must (7 fp32 + 1 fp16 per parameter, plus the
// norm's read). Printed and recorded as test properties: FLOPs, HBM bytes,
// the roofline's lower bound on the step's time on an H200 (datasheet peaks,
// kernels/cuda/cuda_device.h) and the MFU it allows, the activation arena.
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_device.h"
#include "kernels/roofline_backend.h"
#include "model/conformer.h"
#include "model/loss_scaler.h"
#include "model/optimizer.h"
#include "tests/model/random_batch.h"

namespace mpiasr {
namespace {

constexpr int kTokens = 150, kVocab = 128;

struct StepFigures {
  RooflineTally forward_backward, optimizer;  // the two parts of the step
  size_t arena_bytes = 0, parameters = 0, padded_parameters = 0, adamw_segments = 0;
};

StepFigures step_figures(ConformerConfig config, int B, int T) {
  const DatasheetPeaks h200 = datasheet_peaks("NVIDIA H200");
  RooflineBackend<__half, float> backend(h200.fp16_tflops * 1e12, h200.memory_gbps * 1e9);
  config.vocab_size = kVocab;
  config.dropout = 0.1f;
  const HostBatch batch = testing::random_batch(
      std::vector<int>(size_t(B), T),
      std::vector<std::vector<int32_t>>(size_t(B), std::vector<int32_t>(kTokens, 1)), T, 0, 0);
  Conformer<__half, float> model(backend, config, B, T, 1);
  AdamWConfig adamw;
  adamw.clip_norm = 1.0;
  Optimizer<__half, float> optimizer(model.params(), adamw);
  const LossScaler scaler{LossScalerConfig{}};

  StepFigures figures;
  figures.arena_bytes = model.arena_bytes();
  figures.parameters = model.params().num_parameters();
  figures.padded_parameters = model.params().size();
  figures.adamw_segments = optimizer.segments().size();
  backend.reset_tally();
  optimizer.zero_grad();
  optimizer.set_step_inputs(double(B) * kTokens, 1e-3f);
  StepControl* control = optimizer.control();
  model.forward_backward(batch, 1.0, &control->scaler.scale, true, 0, &control->loss_sum);
  figures.forward_backward = backend.tally();
  backend.reset_tally();
  optimizer.add_grad_sum_squares();
  optimizer.decide(scaler.rule());
  optimizer.step();
  figures.optimizer = backend.tally();
  return figures;
}

TEST(StepRoofline, TalliedFlopsEqualTheClosedForm) {
  struct Shape {
    const char* preset;
    int d_model, B, T;  // d_model 0: the preset's
  };
  for (const Shape& shape : {Shape{"tiny", 0, 3, 83}, Shape{"tiny", 0, 1, 7},
                             Shape{"small", 0, 5, 301}, Shape{"large", 64, 2, 160}}) {
    ConformerConfig config = conformer_preset(shape.preset);
    if (shape.d_model) config.d_model = shape.d_model;
    config.vocab_size = kVocab;
    const StepFigures figures = step_figures(config, shape.B, shape.T);
    const double expected = forward_backward_flops(config, shape.B, shape.T);
    EXPECT_NEAR(figures.forward_backward.flops, expected, 1e-12 * expected)
        << shape.preset << " B " << shape.B << " T " << shape.T;
    EXPECT_EQ(figures.optimizer.flops, 0.0);
    // AdamW: w, g, m, v read, w, m, v written (fp32), the fp16 copy written,
    // its segments read; the norm reads g once more; decide_step reads and
    // writes the control.
    const double n = double(figures.padded_parameters);
    EXPECT_EQ(figures.optimizer.bytes, n * (7 * 4 + 2) + n * 4 + 2.0 * sizeof(StepControl) +
                                           double(figures.adamw_segments * sizeof(AdamWSegment)));
    EXPECT_EQ(figures.optimizer.operations, 3.0) << "sum of squares, decision, AdamW";
    EXPECT_EQ(figures.padded_parameters % kParameterAlignment, 0u);
    EXPECT_GE(figures.padded_parameters, figures.parameters);
  }
}

// The figures of docs/gpu.md: medium and large at 32 x 15 s.
TEST(StepRoofline, FiguresAt32x15Seconds) {
  const DatasheetPeaks h200 = datasheet_peaks("NVIDIA H200");
  for (const std::string preset : {"medium", "large"}) {
    const StepFigures figures = step_figures(conformer_preset(preset), 32, 1500);
    const double flops = figures.forward_backward.flops + figures.optimizer.flops;
    const double bytes = figures.forward_backward.bytes + figures.optimizer.bytes;
    const double bound = figures.forward_backward.bound_seconds + figures.optimizer.bound_seconds;
    const double compute_seconds = flops / (h200.fp16_tflops * 1e12);
    const double mfu_bound = compute_seconds / bound;
    const double arena_gib = double(figures.arena_bytes) / double(1 << 30);
    EXPECT_GT(mfu_bound, 0.0);
    EXPECT_LT(mfu_bound, 1.0);
    std::printf(
        "%s, 32 x 1500 frames: %.2f M parameters; %.1f TFLOP, %.1f GB of HBM traffic "
        "(%.0f FLOP/B) in %.0f device operations; on an H200 at least %.1f ms "
        "(compute alone %.1f ms): MFU <= %.1f%%; activation arena %.2f GiB\n",
        preset.c_str(), double(figures.parameters) / 1e6, flops / 1e12, bytes / 1e9, flops / bytes,
        figures.forward_backward.operations + figures.optimizer.operations, bound * 1e3,
        compute_seconds * 1e3, 100 * mfu_bound, arena_gib);
    ::testing::Test::RecordProperty(preset + "_tflop", std::to_string(flops / 1e12));
    ::testing::Test::RecordProperty(preset + "_hbm_gb", std::to_string(bytes / 1e9));
    ::testing::Test::RecordProperty(preset + "_bound_ms", std::to_string(bound * 1e3));
    ::testing::Test::RecordProperty(preset + "_mfu_bound", std::to_string(mfu_bound));
    ::testing::Test::RecordProperty(preset + "_arena_gib", std::to_string(arena_gib));
  }
}

}  // namespace
}  // namespace mpiasr
