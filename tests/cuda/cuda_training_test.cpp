// One full training step of the `tiny` Conformer on the GPU against the same
// step on the CPU backend in fp32, in both mixed precisions: fp16 (loss scale
// 1024) and bf16 (no loss scale), fp32 masters, the token count divided in
// when the gradient is unscaled, as the trainer does (the CPU divides before
// backward). The same initial weights, the same batch and dropout masks
// (Philox is shared), so the only differences are the 16-bit roundings.
// Tolerances, relative: fp16 1e-2 for the losses, the whole gradient (L2 norm
// of the difference over the norm) and the log-probabilities of inference,
// 5e-2 for each larger tensor's gradient; bf16 rounds 8 times coarser (2^-8
// against 2^-11), and its tolerances are 4 times fp16's. After one AdamW step
// the masters move by lr times the sign of nearly the same gradient, so they
// agree within 2 lr everywhere and within lr / 10 almost everywhere (fp16:
// 99% of the elements, bf16: 96%). Each measured deviation is printed with
// its limit (cuda_test::print_worst). Skipped without a GPU; in the emulation
// build it runs on the CPU (kernels/cuda_emu).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "model/conformer.h"
#include "model/optimizer.h"
#include "tests/cuda/cuda_test_util.h"
#include "tests/model/random_batch.h"

namespace mpiasr {
namespace {

constexpr int kVocab = 12;
constexpr float kLr = 1e-3f;

// What differs between the precisions: the loss scale (fp16 needs one, bf16
// has fp32's range) and the tolerances.
template <typename Act>
struct Precision;
template <>
struct Precision<__half> {
  static constexpr float kLossScale = 1024.0f;
  static constexpr double kTolerance = 1e-2, kTensorTolerance = 5e-2, kFarFraction = 0.01;
};
template <>
struct Precision<__nv_bfloat16> {
  static constexpr float kLossScale = 1.0f;
  static constexpr double kTolerance = 4e-2, kTensorTolerance = 2e-1, kFarFraction = 0.04;
};

MPIASR_CUDA_TYPED_SUITE(CudaTraining);

ConformerConfig tiny_config() {
  ConformerConfig config = conformer_preset("tiny");
  config.vocab_size = kVocab;
  config.dropout = 0.1f;
  return config;
}

// Random features N(0, 1) for the valid frames, 0 in the padding.
HostBatch make_batch(const std::vector<int>& frames,
                     const std::vector<std::vector<int32_t>>& targets, int max_frames,
                     uint64_t seed) {
  return testing::random_batch(frames, targets, max_frames, seed, 0);
}

double norm(const std::vector<float>& x, size_t begin, size_t end) {
  double sum = 0.0;
  for (size_t i = begin; i < end; ++i) sum += double(x[i]) * double(x[i]);
  return std::sqrt(sum);
}

double difference_norm(const std::vector<float>& a, const std::vector<float>& b, size_t begin,
                       size_t end) {
  double sum = 0.0;
  for (size_t i = begin; i < end; ++i) sum += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(sum);
}

// One measured deviation and its limit, for the GPU check's table.
void report(const std::string& what, const std::string& measure, double value, double limit) {
  std::ostringstream text;
  text << std::setprecision(3) << measure << " " << value << " (limit " << limit << ")";
  cuda_test::print_worst(what, text.str(), value / limit);
}

TYPED_TEST(CudaTraining, TinyStepMatchesCpu) {
  MPIASR_SKIP_WITHOUT_CUDA();
  using Act = TypeParam;
  using P = Precision<Act>;
  const float kLossScale = P::kLossScale;
  CudaBackend<Act>& gpu = cuda_test::backend<Act>();
  CpuBackend<float> cpu(2);
  const ConformerConfig config = tiny_config();
  const HostBatch batch =
      make_batch({83, 60, 47}, {{1, 2, 3, 3, 4, 11}, {5, 5, 6, 7}, {8, 9, 10}}, 83, 17);
  const double tokens = 13.0;
  const uint64_t dropout_seed = 99;

  Conformer<float, float> cpu_model(cpu, config, 3, 83, 5);
  Conformer<Act, float> gpu_model(gpu, config, 3, 83, 5);
  ParameterStore<float, float>& cpu_params = cpu_model.params();
  ParameterStore<Act, float>& gpu_params = gpu_model.params();
  ASSERT_EQ(cpu_params.size(), gpu_params.size());
  const size_t n = cpu_params.size();
  const std::vector<float> initial(cpu_params.master(), cpu_params.master() + n);
  EXPECT_EQ(cuda_test::download(gpu, gpu_params.master(), n), initial);

  const std::vector<double> cpu_losses =
      cpu_model.forward_backward(batch, tokens, 1.0f, false, dropout_seed);
  const std::vector<double> gpu_losses =
      gpu_model.forward_backward(batch, 1.0, kLossScale, false, dropout_seed);
  double worst_loss = 0.0;
  for (size_t b = 0; b < cpu_losses.size(); ++b) {
    EXPECT_NEAR(gpu_losses[b], cpu_losses[b], P::kTolerance * cpu_losses[b]) << "utterance " << b;
    worst_loss = std::max(worst_loss, std::abs(gpu_losses[b] - cpu_losses[b]) / cpu_losses[b]);
  }
  report("losses", "relative difference", worst_loss, P::kTolerance);

  const std::vector<float> cpu_grad(cpu_params.grad(), cpu_params.grad() + n);
  std::vector<float> gpu_grad = cuda_test::download(gpu, gpu_params.grad(), n);
  const float unscale = float(1.0 / (double(kLossScale) * tokens));
  for (float& g : gpu_grad) g *= unscale;
  const double total = norm(cpu_grad, 0, n);
  ASSERT_GT(total, 0.0);
  const double grad_difference = difference_norm(gpu_grad, cpu_grad, 0, n) / total;
  EXPECT_LT(grad_difference, P::kTolerance);
  report("gradient", "|gpu - cpu| / |cpu|", grad_difference, P::kTolerance);
  double worst_tensor = 0.0;
  std::string worst_name;
  for (const ParameterInfo& info : cpu_params.infos()) {
    const size_t end = info.offset + info.count;
    const double tensor = norm(cpu_grad, info.offset, end);
    if (tensor < 1e-2 * total) continue;  // tiny tensors: covered by the total
    const double difference = difference_norm(gpu_grad, cpu_grad, info.offset, end) / tensor;
    EXPECT_LT(difference, P::kTensorTolerance) << info.name;
    if (difference > worst_tensor) worst_tensor = difference, worst_name = info.name;
  }
  report("gradient of " + worst_name, "|gpu - cpu| / |cpu|", worst_tensor, P::kTensorTolerance);

  // The step as the trainer takes it: the decision on each backend (the GPU's
  // unscales by the loss scale and the token count), then AdamW.
  Optimizer<float, float> cpu_optimizer(cpu_params);
  Optimizer<Act, float> gpu_optimizer(gpu_params);
  gpu_optimizer.set_state(0, {kLossScale, 0, 0});
  cpu_optimizer.set_step_inputs(1.0, kLr);
  cpu_optimizer.add_grad_sum_squares();
  cpu_optimizer.decide(LossScalerRule{});
  cpu_optimizer.step();
  gpu_optimizer.set_step_inputs(tokens, kLr);
  gpu_optimizer.add_grad_sum_squares();
  gpu_optimizer.decide(LossScalerRule{.enabled = kLossScale > 1.0f ? 1 : 0});  // fp16 only
  gpu_optimizer.step();
  EXPECT_EQ(gpu_optimizer.read_control().grad_scale, unscale);
  const std::vector<float> cpu_master(cpu_params.master(), cpu_params.master() + n);
  const std::vector<float> gpu_master = cuda_test::download(gpu, gpu_params.master(), n);
  size_t far = 0;
  double worst_master = 0.0;
  for (size_t i = 0; i < n; ++i) {
    const double diff = std::abs(double(gpu_master[i]) - cpu_master[i]);
    ASSERT_LE(diff, 2.01 * kLr) << "element " << i;
    far += diff > 0.1 * kLr;
    worst_master = std::max(worst_master, diff);
  }
  EXPECT_LT(double(far) / double(n), P::kFarFraction);
  report("masters after AdamW", "max |gpu - cpu|", worst_master, 2.01 * kLr);
  report("masters after AdamW", "share further apart than lr / 10", double(far) / double(n),
         P::kFarFraction);
  EXPECT_EQ(cuda_test::download(gpu, gpu_params.compute(), n), cuda_test::rounded<Act>(gpu_master));

  std::vector<float> cpu_logprobs, gpu_logprobs;
  std::vector<int32_t> cpu_lengths, gpu_lengths;
  cpu_model.infer(batch, cpu_logprobs, cpu_lengths);
  gpu_model.infer(batch, gpu_logprobs, gpu_lengths);
  EXPECT_EQ(gpu_lengths, cpu_lengths);
  ASSERT_EQ(gpu_logprobs.size(), cpu_logprobs.size());
  double worst = 0.0;
  for (size_t i = 0; i < cpu_logprobs.size(); ++i) {
    worst = std::max(worst, std::abs(double(gpu_logprobs[i]) - cpu_logprobs[i]) /
                                std::max(1.0, std::abs(double(cpu_logprobs[i]))));
  }
  EXPECT_LT(worst, P::kTolerance);
  report("inference log-probabilities", "|gpu - cpu| / max(1, |cpu|)", worst, P::kTolerance);
}

}  // namespace
}  // namespace mpiasr
