// What a training step asks of the GPU, counted (kernels/cuda/call_counts.h):
// the step as the trainer queues it (zero_grad, the step's inputs, forward +
// backward with the device loss scale, the gradient's sum of squares, the
// decision, AdamW) waits for the device not once, and the same number of
// kernels every step; reading the step control back, as a progress line does,
// is the one wait. In the emulation build the emulated runtime counts every
// CUDA call it receives (kernels/cuda_emu/runtime.h), an independent count:
// no call that makes the host wait (a synchronization, a copy from or to
// pageable memory), and as many launches as the backend counted. The launch
// counts of `tiny` and of `large`'s structure (18 blocks, narrow) are printed
// and recorded as test properties for the table of docs/gpu.md. cuBLASLt's
// descriptors and heuristic queries are made on a GEMM shape's first call
// (kernels/cuda/gemm.cpp) of the test process's backend: the first step of
// the first test of a precision makes them, later steps none (where each call
// made its own, a step made five descriptors and one query per GEMM).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "kernels/cuda/call_counts.h"
#include "model/conformer.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/cuda/training_step.h"
#include "tests/model/random_batch.h"

namespace mpiasr {
namespace {

// Launches and host waits of one step, by both counts where there are two.
struct StepCounts {
  uint64_t launches = 0, host_waits = 0, graph_launches = 0;
  uint64_t gemm_calls = 0, gemm_descriptors = 0, gemm_heuristic_queries = 0;
  uint64_t runtime_launches = 0, runtime_host_syncs = 0;  // the emulated runtime's
};

void reset_counts() {
  reset_cuda_call_counts();
#ifdef MPIASR_CUDA_EMU
  emu::reset_api_counts();
#endif
}

StepCounts counts_since_reset() {
  StepCounts counts;
  const CudaCallCounts backend = cuda_call_counts();
  counts.launches = backend.launches;
  counts.host_waits = backend.host_waits;
  counts.graph_launches = backend.graph_launches;
  counts.gemm_calls = backend.gemm_calls;
  counts.gemm_descriptors = backend.gemm_descriptors;
  counts.gemm_heuristic_queries = backend.gemm_heuristic_queries;
#ifdef MPIASR_CUDA_EMU
  const emu::ApiCounts runtime = emu::api_counts();
  counts.runtime_launches = runtime.launches;
  counts.runtime_host_syncs = runtime.host_syncs();
#endif
  return counts;
}

// Trains `steps` steps of a model of `config` on a fixed batch and returns
// the counts of each (the first ones grow scratch buffers; with `graphs`
// the first captures the step graph), in the precision of Act (the loss
// scaler on in fp16 only, as the trainer has it).
template <typename Act>
std::vector<StepCounts> step_counts(ConformerConfig config, int steps, bool graphs = false) {
  CudaBackend<Act>& gpu = cuda_test::backend<Act>();
  cuda_test::queries_answer_as_a_gpu_that_keeps_up();
  config.vocab_size = 12;
  config.dropout = 0.1f;
  const HostBatch batch = testing::random_batch(
      {83, 60, 47}, {{1, 2, 3, 3, 4, 11}, {5, 5, 6, 7}, {8, 9, 10}}, 83, 17, 0);
  cuda_test::TrainingStep<Act> training(gpu, config);
  std::vector<StepCounts> counts;
  for (int step = 0; step < steps; ++step) {
    reset_counts();
    if (graphs) {
      training.run(batch, uint64_t(step),
                   [&](const std::function<void()>& queue) { gpu.queue_as_graph(queue); });
    } else {
      training.run(batch, uint64_t(step));
    }
    counts.push_back(counts_since_reset());
  }
  reset_counts();
  const StepControl read = training.optimizer.read_control();
  const StepCounts reading = counts_since_reset();
  EXPECT_EQ(read.steps, steps);
  EXPECT_EQ(read.optimizer_step + read.skipped, steps);
  EXPECT_GT(read.loss_sum, 0.0);
  EXPECT_EQ(reading.launches, 0u);
  EXPECT_EQ(reading.host_waits, 1u) << "reading the control back is the one wait";
  return counts;
}

void check_steady_steps(const std::vector<StepCounts>& counts, const std::string& what) {
  ASSERT_GE(counts.size(), 3u);
  const StepCounts& steady = counts.back();
  for (size_t step = 1; step < counts.size(); ++step) {
    EXPECT_GT(counts[step].gemm_calls, 0u) << what << ": step " << step;
    EXPECT_EQ(counts[step].gemm_descriptors, 0u) << what << ": step " << step;
    EXPECT_EQ(counts[step].gemm_heuristic_queries, 0u) << what << ": step " << step;
  }
  for (size_t step = 2; step < counts.size(); ++step) {
    EXPECT_EQ(counts[step].host_waits, 0u) << what << ": step " << step;
    EXPECT_EQ(counts[step].launches, steady.launches) << what << ": step " << step;
    EXPECT_EQ(counts[step].graph_launches, steady.graph_launches) << what << ": step " << step;
    if (cuda_test::kEmulated) {
      EXPECT_EQ(counts[step].runtime_host_syncs, 0u) << what << ": step " << step;
      EXPECT_EQ(counts[step].runtime_launches, counts[step].launches) << what << ": step " << step;
    }
  }
  std::printf(
      "%s: %llu kernel launches (cuBLAS GEMMs included), %llu graph launches and %llu host waits "
      "per step\n",
      what.c_str(), static_cast<unsigned long long>(steady.launches),
      static_cast<unsigned long long>(steady.graph_launches),
      static_cast<unsigned long long>(steady.host_waits));
  std::printf(
      "%s: %llu GEMM calls per step; cuBLASLt descriptors and heuristic queries %llu and %llu in "
      "the first step, none after (one set per call: %llu and %llu every step)\n",
      what.c_str(), static_cast<unsigned long long>(steady.gemm_calls),
      static_cast<unsigned long long>(counts[0].gemm_descriptors),
      static_cast<unsigned long long>(counts[0].gemm_heuristic_queries),
      static_cast<unsigned long long>(5 * steady.gemm_calls),
      static_cast<unsigned long long>(steady.gemm_calls));
  ::testing::Test::RecordProperty(what + "_launches_per_step", int(steady.launches));
}

TEST(CudaStepCounts, TinyStepNeverWaitsForTheDeviceInFp16) {
  MPIASR_SKIP_WITHOUT_CUDA();
  check_steady_steps(step_counts<__half>(conformer_preset("tiny"), 4), "tiny_fp16");
}

TEST(CudaStepCounts, TinyStepNeverWaitsForTheDeviceInBf16) {
  MPIASR_SKIP_WITHOUT_CUDA();
  check_steady_steps(step_counts<__nv_bfloat16>(conformer_preset("tiny"), 4), "tiny_bf16");
}

// large's launches depend on its structure (18 blocks; the batch here takes
// one Conv2d chunk, as 32 x 15 s does with the default column budget), not on
// its width, so a narrow copy counts them at the emulator's speed; in bf16,
// the default on the GPUs that run it.
TEST(CudaStepCounts, LargeStructureStepNeverWaitsForTheDevice) {
  MPIASR_SKIP_WITHOUT_CUDA();
  ConformerConfig config = conformer_preset("large");
  config.d_model = 64;
  config.subsampling_channels = 32;
  check_steady_steps(step_counts<__nv_bfloat16>(config, 3), "large_structure");
}

// As a step graph (training.cuda_graphs), forward and backward are one graph
// launch; what is left are the optimizer's kernels and the input copies.
TEST(CudaStepCounts, AsAStepGraphOnlyTheOptimizerIsLaunched) {
  MPIASR_SKIP_WITHOUT_CUDA();
  const std::vector<StepCounts> eager = step_counts<__half>(conformer_preset("tiny"), 4);
  const std::vector<StepCounts> graphed = step_counts<__half>(conformer_preset("tiny"), 4, true);
  check_steady_steps(graphed, "tiny_fp16_graphs");
  EXPECT_EQ(graphed.back().graph_launches, 1u);
  EXPECT_EQ(eager.back().graph_launches, 0u);
  EXPECT_LT(graphed.back().launches * 10, eager.back().launches);
}

}  // namespace
}  // namespace mpiasr
