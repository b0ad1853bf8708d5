// CpuBackend as the model sees it, through the Backend interface: memory
// operations, thread count, and the loss and optimizer calls forwarded to
// their kernels (checked against those kernels called directly); and how
// the kernels share a row's columns among threads.
#include "kernels/cpu/cpu_backend.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/adamw.h"
#include "kernels/cpu/ctc_loss.h"
#include "kernels/cpu/parallel.h"
#include "src/base/error.h"
#include "tests/kernels/gradient_check.h"

namespace mpiasr {
namespace {

// Every column once, in order, and each share starting on a 64-byte line.
template <typename T>
void expect_columns_cut_at_cache_lines() {
  for (int threads : {1, 2, 3, 5}) {
    for (int columns : {1, 7, 16, 20, 144, 576, 1001}) {
      std::vector<ColumnRange> shares(static_cast<size_t>(threads));
#pragma omp parallel num_threads(threads)
      shares[size_t(omp_get_thread_num())] = thread_columns<T>(columns);
      int next = 0;
      for (const ColumnRange& share : shares) {
        if (share.begin == share.end) continue;
        EXPECT_EQ(share.begin, next) << threads << " threads, " << columns << " columns";
        EXPECT_EQ(share.begin * sizeof(T) % 64, 0u) << share.begin;
        next = share.end;
      }
      EXPECT_EQ(next, columns) << threads << " threads";
    }
  }
}

TEST(ThreadColumns, EveryColumnOnceInSharesStartingOnCacheLines) {
  expect_columns_cut_at_cache_lines<float>();
  expect_columns_cut_at_cache_lines<double>();
}

TEST(CpuBackend, MemoryOperations) {
  std::unique_ptr<Backend<float, float>> backend = std::make_unique<CpuBackend<float>>(1);
  for (size_t bytes : {size_t(0), size_t(1), size_t(1000), size_t(1) << 20}) {
    void* p = backend->alloc(bytes);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 256, 0u) << bytes;
    backend->release(p);
  }
  const std::vector<float> host = {1, 2, 3, 4};
  float* a = static_cast<float*>(backend->alloc(sizeof(float) * 4));
  float* b = static_cast<float*>(backend->alloc(sizeof(float) * 4));
  backend->to_device(a, host.data(), sizeof(float) * 4);
  backend->copy(b, a, sizeof(float) * 4);
  backend->zero(a, sizeof(float) * 2);
  backend->synchronize();
  std::vector<float> back(4);
  backend->to_host(back.data(), b, sizeof(float) * 4);
  EXPECT_EQ(back, host);
  backend->to_host(back.data(), a, sizeof(float) * 4);
  EXPECT_EQ(back, (std::vector<float>{0, 0, 3, 4}));
  backend->release(a);
  backend->release(b);
  backend->release(nullptr);
}

TEST(CpuBackend, ThreadCountAndName) {
  EXPECT_EQ(CpuBackend<float>(0).num_threads(), omp_get_num_procs());
  EXPECT_EQ(CpuBackend<float>(3).num_threads(), 3);
  EXPECT_THROW(CpuBackend<float>(-1), Error);
  const std::string name = CpuBackend<double>(2).name();
  EXPECT_NE(name.find("cpu-fp64"), std::string::npos) << name;
  EXPECT_NE(name.find("2 threads"), std::string::npos) << name;
}

TEST(CpuBackend, ForwardsLossAndOptimizerCalls) {
  std::mt19937_64 rng(91);
  CpuBackend<double> cpu(2);
  Backend<double, double>& backend = cpu;
  // CTC on a log-softmax of random logits.
  const int B = 2, T = 6, V = 5;
  const auto logits = testing::random_vector(size_t(B) * T * V, rng, -2.0, 2.0);
  std::vector<double> lp(logits.size());
  backend.log_softmax_forward(lp.data(), logits.data(), B * T, V);
  const std::vector<int32_t> targets = {1, 2, 3, 4, 4}, target_lengths = {3, 2},
                             input_lengths = {6, 4};
  const std::vector<double> scale = {0.5, 0.0};
  std::vector<double> losses(B), expected_losses(B), d(lp.size()), expected_d(lp.size());
  // The loss scale multiplies the gradient (a power of two: exactly); the sum
  // takes the utterances whose scale is not 0, in order.
  const float loss_scale = 8.0f;
  double loss_sum = 0.5;
  backend.ctc_loss(losses.data(), d.data(), lp.data(), targets.data(), target_lengths.data(),
                   input_lengths.data(), scale.data(), &loss_scale, &loss_sum, B, T, V);
  cpu_ctc_loss<double>(expected_losses.data(), expected_d.data(), lp.data(), targets.data(),
                       target_lengths.data(), input_lengths.data(), scale.data(), B, T, V);
  EXPECT_EQ(losses, expected_losses);
  for (double& x : expected_d) x *= 8.0;
  EXPECT_EQ(d, expected_d);
  double expected_sum = 0.5;
  for (int b = 0; b < B; ++b) expected_sum += scale[size_t(b)] != 0.0 ? expected_losses[b] : 0.0;
  EXPECT_EQ(loss_sum, expected_sum);
  // AdamW and the sum of squares.
  const size_t n = 100;
  const auto g = testing::random_vector(n, rng);
  auto w = testing::random_vector(n, rng), m = std::vector<double>(n, 0.0), v = m;
  auto w2 = w, m2 = m, v2 = v;
  std::vector<double> w_act(n);
  StepControl control;
  control.lr = 1e-3f;
  double sum = 0.25;
  backend.add_sum_squares(&sum, g.data(), n);
  EXPECT_DOUBLE_EQ(sum, 0.25 + testing::dot(g, g));
  control.grad_sum_squares = sum;
  StepRule rule;
  backend.decide_step(&control, rule);
  ASSERT_EQ(control.apply, 1);
  const AdamWHyper hyper{0.9f, 0.98f, 1e-9f};
  const AdamWSegment segment{0, n, 0, 1e-3f};
  backend.adamw_step(w.data(), w_act.data(), g.data(), m.data(), v.data(), &segment, 1, n, hyper,
                     &control);
  cpu_adamw_step<double>(w2.data(), nullptr, g.data(), m2.data(), v2.data(), n,
                         adamw_coefficients<double>(control, hyper, 1e-3f));
  EXPECT_EQ(w, w2);
  EXPECT_EQ(w_act, w2);
  EXPECT_EQ(m, m2);
  EXPECT_EQ(v, v2);
  control.apply = 0;  // a skipped step changes nothing
  backend.adamw_step(w.data(), w_act.data(), g.data(), m.data(), v.data(), &segment, 1, n, hyper,
                     &control);
  EXPECT_EQ(w, w2);
  EXPECT_EQ(m, m2);
}

}  // namespace
}  // namespace mpiasr
