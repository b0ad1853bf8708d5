// Training end to end in fp32: the tiny model (dropout 0.1) memorizes 8
// utterances of random features with random targets, the token-averaged CTC
// loss falling by at least 90% within 300 AdamW steps, and a second run from
// the same seeds reproduces every loss exactly; dividing the gradient by the
// token count when it is unscaled (as the trainer does) trains like dividing
// before backward, up to rounding.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "model/conformer.h"
#include "model/optimizer.h"

namespace mpiasr {
namespace {

constexpr int kUtterances = 8, kMaxFrames = 100, kVocab = 12, kMaxSteps = 300;

HostBatch random_batch() {
  HostBatch batch;
  batch.batch_size = kUtterances;
  batch.max_frames = kMaxFrames;
  batch.n_mels = 80;
  batch.features.resize(size_t(kUtterances) * kMaxFrames * 80);
  batch.frame_lengths.resize(kUtterances);
  batch.target_lengths.resize(kUtterances);
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  std::vector<int32_t> targets;
  for (int b = 0; b < kUtterances; ++b) {
    const int frames = 60 + int(rng() % 41);
    batch.frame_lengths[size_t(b)] = frames;
    for (int t = 0; t < kMaxFrames; ++t) {
      for (int m = 0; m < 80; ++m) {
        batch.features[(size_t(b) * kMaxFrames + size_t(t)) * 80 + size_t(m)] =
            t < frames ? normal(rng) : 0.0f;
      }
    }
    const int tokens = 4 + int(rng() % 3);
    batch.target_lengths[size_t(b)] = tokens;
    for (int u = 0; u < tokens; ++u) targets.push_back(1 + int32_t(rng() % (kVocab - 1)));
  }
  batch.targets.resize(targets.size());
  std::copy(targets.begin(), targets.end(), batch.targets.data());
  return batch;
}

// Where the gradient is divided by the token count: before backward (the
// loss divisor), or when it is unscaled, with the loss scale (the trainer).
enum class Division { kBeforeBackward, kAtUnscale };

struct Training {
  std::vector<double> losses;      // token-averaged, one per step
  std::vector<double> grad_norms;  // of the token-averaged loss
  std::vector<float> masters;      // after the last step
};

// Trains for `steps` steps, or until the loss is below 10% of the first when
// steps < 0; `divisor_nudge` makes the token count that share larger.
Training train(const HostBatch& batch, int steps, Division division = Division::kAtUnscale,
               double divisor_nudge = 0.0) {
  CpuBackend<float> backend(1);
  ConformerConfig config = conformer_preset("tiny");
  config.vocab_size = kVocab;
  Conformer<float, float> model(backend, config, kUtterances, kMaxFrames, 1);
  AdamWConfig adamw;
  adamw.clip_norm = 5.0;
  Optimizer<float, float> optimizer(model.params(), adamw);
  double tokens = 0.0;
  for (int b = 0; b < batch.batch_size; ++b) tokens += batch.target_lengths[size_t(b)];
  tokens *= 1.0 + divisor_nudge;
  const bool before = division == Division::kBeforeBackward;

  Training run;
  for (int step = 0; step < (steps < 0 ? kMaxSteps : steps); ++step) {
    optimizer.zero_grad();
    const std::vector<double> losses =
        model.forward_backward(batch, before ? tokens : 1.0, 1.0f, false, uint64_t(1000 + step));
    double loss = 0.0;
    for (double l : losses) loss += l;
    run.losses.push_back(loss / tokens);
    const float warmup = std::min(1.0f, float(step + 1) / 20.0f);
    optimizer.set_step_inputs(before ? 1.0 : tokens, 3e-3f * warmup);
    optimizer.add_grad_sum_squares();
    optimizer.decide(LossScalerRule{});
    optimizer.step();
    run.grad_norms.push_back(optimizer.read_control().grad_norm);
    if (steps < 0 && run.losses.back() <= 0.1 * run.losses.front()) break;
  }
  ParameterStore<float, float>& params = model.params();
  run.masters.assign(params.master(), params.master() + params.size());
  return run;
}

TEST(Overfit, TinyMemorizesEightUtterancesDeterministically) {
  const HostBatch batch = random_batch();
  const std::vector<double> first = train(batch, -1).losses;
  ASSERT_FALSE(first.empty());
  EXPECT_GT(first.front(), 2.0);
  EXPECT_LE(first.back(), 0.1 * first.front()) << "after " << first.size() << " steps the loss is "
                                               << first.back() << " from " << first.front();
  const std::vector<double> second = train(batch, int(first.size())).losses;
  ASSERT_EQ(second.size(), first.size());
  for (size_t step = 0; step < first.size(); ++step) {
    ASSERT_EQ(second[step], first[step]) << "step " << step;
  }
  RecordProperty("steps_to_90_percent", int(first.size()));
}

// The largest relative difference of two runs' losses and of their gradient
// norms over the steps, and the largest difference of their final weights.
struct Deviation {
  double loss = 0, grad_norm = 0, weight = 0;
};

Deviation deviation(const Training& a, const Training& b) {
  Deviation d;
  for (size_t step = 0; step < a.losses.size(); ++step) {
    d.loss = std::max(d.loss, std::abs(a.losses[step] / b.losses[step] - 1));
    d.grad_norm = std::max(d.grad_norm, std::abs(a.grad_norms[step] / b.grad_norms[step] - 1));
  }
  for (size_t i = 0; i < a.masters.size(); ++i) {
    d.weight = std::max(d.weight, std::abs(double(a.masters[i]) - b.masters[i]));
  }
  return d;
}

// The trainer divides by the token count when it unscales the gradient, so
// that fp16 gradients do not shrink with the number of ranks. In fp32 that is
// the same training as dividing before backward up to rounding (backward is
// linear in the loss gradient): over 20 steps the losses agree to 1e-6, the
// gradient norms (which a wrong factor would change) to 1e-5 and the weights
// to a hundredth of one step's size. For scale, the same run with the divisor
// one ulp larger is printed: it moves as far from the first as the new order.
TEST(Overfit, DividingAtUnscaleTrainsLikeDividingBeforeBackward) {
  const HostBatch batch = random_batch();
  const int steps = 20;
  const Training before = train(batch, steps, Division::kBeforeBackward);
  const Training at_unscale = train(batch, steps, Division::kAtUnscale);
  const Training one_ulp = train(batch, steps, Division::kBeforeBackward, std::ldexp(1.0, -23));
  ASSERT_EQ(at_unscale.masters.size(), before.masters.size());
  const Deviation found = deviation(at_unscale, before), ulp = deviation(one_ulp, before);
  EXPECT_EQ(at_unscale.losses[0], before.losses[0]);  // the same weights: the same loss
  EXPECT_LT(found.loss, 1e-6);
  EXPECT_LT(found.grad_norm, 1e-5);
  EXPECT_LT(found.weight, 1e-2 * 3e-3);
  std::printf(
      "over %d steps, dividing at unscale / with the divisor one ulp larger, against dividing "
      "before backward: losses %.2g / %.2g, gradient norms %.2g / %.2g (relative), weights %.2g / "
      "%.2g\n",
      steps, found.loss, ulp.loss, found.grad_norm, ulp.grad_norm, found.weight, ulp.weight);
}

}  // namespace
}  // namespace mpiasr
