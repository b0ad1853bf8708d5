// Elementwise operations and log-softmax against direct formulas: casts,
// scaled adds (aliased too), padding masks, and log-softmax's normalization and
// range safety.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/elementwise.h"
#include "src/base/error.h"
#include "tests/kernels/gradient_check.h"

namespace mpiasr {
namespace {

using testing::random_vector;
using testing::relative_error;

TEST(Elementwise, CastsAndScaledAdds) {
  const size_t n = 50000;  // above the parallel threshold
  std::mt19937_64 rng(81);
  const auto x = random_vector(n, rng), r = random_vector(n, rng);
  CpuBackend<double> backend(2);
  std::vector<double> y(n);
  cpu_add_scaled(y.data(), x.data(), r.data(), 0.5f, n);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(y[i], x[i] + 0.5 * r[i]);
  auto aliased = x;  // y = x in place
  cpu_add_scaled(aliased.data(), aliased.data(), r.data(), 0.5f, n);
  EXPECT_EQ(aliased, y);
  aliased = r;  // y = r in place
  cpu_add_scaled(aliased.data(), x.data(), aliased.data(), 0.5f, n);
  EXPECT_EQ(aliased, y);

  const auto x_f = testing::to_float(x);
  std::vector<double> from_f32(n);
  backend.cast_f32_to_act(from_f32.data(), x_f.data(), n);
  EXPECT_EQ(from_f32, testing::to_double(x_f));
  std::vector<double> copy(n);
  backend.cast_acc_to_act(copy.data(), x.data(), n);
  EXPECT_EQ(copy, x);
  backend.cast_act_to_acc(copy.data(), r.data(), n);
  EXPECT_EQ(copy, r);
}

TEST(Elementwise, MaskPaddingZeroesExactlyThePaddedRows) {
  const int B = 3, T = 5, C = 2;
  std::vector<float> x(B * T * C, 1.0f);
  const std::vector<int32_t> lengths = {5, 2, 0};
  CpuBackend<float> backend(1);
  backend.mask_padding(x.data(), lengths.data(), B, T, C);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int c = 0; c < C; ++c) EXPECT_EQ(x[(b * T + t) * C + c], t < lengths[b] ? 1.0f : 0.0f);
  const std::vector<int32_t> bad = {5, 6, 0};
  EXPECT_THROW(backend.mask_padding(x.data(), bad.data(), B, T, C), Error);
}

TEST(LogSoftmax, MatchesFormulaAndNormalizes) {
  const int N = 100, V = 500;  // above the parallel threshold
  std::mt19937_64 rng(82);
  auto logits = random_vector(size_t(N) * V, rng, -10.0, 10.0);
  logits[3] = 1000.0;  // would overflow exp without the max subtraction
  CpuBackend<double> backend(2);
  std::vector<double> lp(logits.size());
  backend.log_softmax_forward(lp.data(), logits.data(), N, V);
  for (int n = 1; n < N; ++n) {
    double sum = 0;
    for (int v = 0; v < V; ++v) sum += std::exp(logits[n * V + v]);
    for (int v = 0; v < V; ++v)
      ASSERT_NEAR(lp[n * V + v], logits[n * V + v] - std::log(sum), 1e-12);
  }
  double total = 0;
  for (int v = 0; v < V; ++v) total += std::exp(lp[v]);
  EXPECT_NEAR(total, 1.0, 1e-14);
  EXPECT_NEAR(lp[3], 0.0, 1e-14);

  CpuBackend<float> f(2);
  const auto logits_f = testing::to_float(logits);
  std::vector<float> lp_f(logits.size());
  f.log_softmax_forward(lp_f.data(), logits_f.data(), N, V);
  EXPECT_LT(relative_error(testing::to_double(lp_f), lp), testing::kFloatTolerance);
}

}  // namespace
}  // namespace mpiasr
