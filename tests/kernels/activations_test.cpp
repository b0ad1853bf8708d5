// ReLU, Swish (with the dropout after it) and GLU against their formulas
// written here with std::exp, their backward passes against central
// differences, sigmoid's range safety, and float against double.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/activations.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/philox.h"
#include "tests/kernels/gradient_check.h"

namespace mpiasr {
namespace {

using testing::kGradTolerance;
using testing::random_vector;
using testing::relative_error;

double reference_sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}

// Values away from ReLU's kink so central differences are exact up to rounding.
std::vector<double> inputs_away_from_zero(size_t n, std::mt19937_64& rng) {
  auto x = random_vector(n, rng, -4.0, 4.0);
  for (double& v : x)
    if (std::abs(v) < 0.05) v += 0.1;
  return x;
}

TEST(BranchlessExp, MatchesExpWithinOneAndAHalfUlp) {
  double worst = 0;
  for (float x = -87.0f; x < 88.0f; x += 0.0037f) {
    const double expected = std::exp(double(x));
    worst = std::max(worst, std::abs(double(branchless_exp(x)) - expected) / expected);
  }
  EXPECT_LT(worst, 1.5 * 0x1p-23);
  EXPECT_EQ(branchless_exp(0.0f), 1.0f);
  EXPECT_EQ(branchless_exp(-100.0f), 0.0f);
  EXPECT_EQ(branchless_exp(-INFINITY), 0.0f);
  EXPECT_EQ(branchless_exp(INFINITY), INFINITY);
  EXPECT_EQ(branchless_exp(100.0f), INFINITY);
  EXPECT_TRUE(std::isnan(branchless_exp(NAN)));
}

TEST(Activations, FloatEdgeCases) {
  EXPECT_EQ(sigmoid(INFINITY), 1.0f);
  EXPECT_EQ(sigmoid(-INFINITY), 0.0f);
  EXPECT_EQ(sigmoid(0.0f), 0.5f);
  EXPECT_TRUE(std::isnan(sigmoid(NAN)));
  EXPECT_TRUE(std::isnan(relu(NAN)));
  EXPECT_TRUE(std::isnan(relu(-NAN)));
  EXPECT_EQ(relu(-INFINITY), 0.0f);
  EXPECT_EQ(relu(-2.5f), 0.0f);
  EXPECT_EQ(relu(2.5f), 2.5f);
  EXPECT_EQ(relu_grad(2.5f, 3.0f), 3.0f);
  EXPECT_EQ(relu_grad(-2.5f, 3.0f), 0.0f);
  EXPECT_EQ(relu_grad(0.0f, 3.0f), 0.0f);
  for (float x = -30.0f; x < 30.0f; x += 0.01f) {
    const double expected = 1.0 / (1.0 + std::exp(-double(x)));
    ASSERT_NEAR(sigmoid(x), expected, 2e-7 * expected) << x;
  }
}

TEST(Activations, SigmoidIsFiniteAndCorrectAtExtremes) {
  for (double x : {-800.0, -50.0, -1.0, 0.0, 2.0, 50.0, 800.0}) {
    EXPECT_NEAR(sigmoid(x), reference_sigmoid(x), 1e-16) << x;
    EXPECT_TRUE(std::isfinite(swish_grad(x, 1.0))) << x;
  }
  for (float x : {-200.0f, 200.0f}) EXPECT_TRUE(std::isfinite(sigmoid(x)));
  EXPECT_EQ(sigmoid(-800.0), 0.0);
  EXPECT_EQ(sigmoid(800.0), 1.0);
}

TEST(Activations, ForwardMatchesFormulas) {
  const int N = 200, C = 100;  // GLU input [N, 2C]; n = 2NC is above the parallel threshold
  const size_t n = size_t(2) * N * C;
  std::mt19937_64 rng(41);
  const auto x = inputs_away_from_zero(n, rng);
  CpuBackend<double> backend(2);
  std::vector<double> relu_out(n), swish_out(n), glu_out(size_t(N) * C);
  std::vector<double> swish_dropped(n);
  cpu_relu_forward(relu_out.data(), x.data(), n);
  backend.swish_dropout_forward(swish_out.data(), x.data(), 0.0f, 5, 8, n);
  backend.swish_dropout_forward(swish_dropped.data(), x.data(), 0.2f, 5, 8, n);
  cpu_glu_forward(glu_out.data(), x.data(), N, C);
  for (size_t i = 0; i < n; ++i) {
    EXPECT_EQ(relu_out[i], x[i] > 0 ? x[i] : 0.0);
    const double swish = x[i] * reference_sigmoid(x[i]);
    EXPECT_NEAR(swish_out[i], swish, 1e-15);
    EXPECT_NEAR(swish_dropped[i], dropout_keep(5, 8 + i, 0.2f) ? swish / (1.0 - double(0.2f)) : 0.0,
                1e-15);
  }
  for (int r = 0; r < N; ++r)
    for (int c = 0; c < C; ++c)
      EXPECT_NEAR(glu_out[r * C + c], x[r * 2 * C + c] * reference_sigmoid(x[r * 2 * C + C + c]),
                  1e-15);
}

TEST(Activations, BackwardMatchesFiniteDifferences) {
  const int N = 4, C = 6;
  const size_t n = size_t(2) * N * C;
  std::mt19937_64 rng(42);
  auto x = inputs_away_from_zero(n, rng);
  const auto g = random_vector(n, rng), g_glu = random_vector(size_t(N) * C, rng);
  CpuBackend<double> backend(1);
  std::vector<double> out(n), dx(n);

  auto relu_loss = [&] {
    cpu_relu_forward(out.data(), x.data(), n);
    return testing::dot(g, out);
  };
  backend.relu_backward(dx.data(), g.data(), x.data(), n);
  EXPECT_LT(relative_error(dx, testing::numeric_gradient(x, relu_loss)), kGradTolerance);

  for (float p : {0.0f, 0.3f}) {
    auto swish_loss = [&] {
      backend.swish_dropout_forward(out.data(), x.data(), p, 6, 2, n);
      return testing::dot(g, out);
    };
    backend.swish_dropout_backward(dx.data(), g.data(), x.data(), p, 6, 2, n);
    EXPECT_LT(relative_error(dx, testing::numeric_gradient(x, swish_loss)), kGradTolerance)
        << "p=" << p;
  }

  std::vector<double> glu_out(size_t(N) * C);
  auto glu_loss = [&] {
    cpu_glu_forward(glu_out.data(), x.data(), N, C);
    return testing::dot(g_glu, glu_out);
  };
  cpu_glu_backward(dx.data(), g_glu.data(), x.data(), N, C);
  EXPECT_LT(relative_error(dx, testing::numeric_gradient(x, glu_loss)), kGradTolerance);
}

TEST(Activations, FloatMatchesDouble) {
  const int N = 300, C = 144;
  const size_t n = size_t(2) * N * C;
  std::mt19937_64 rng(43);
  const auto x = random_vector(n, rng, -6.0, 6.0), g = random_vector(n, rng);
  const auto x_f = testing::to_float(x), g_f = testing::to_float(g);
  CpuBackend<double> d(2);
  CpuBackend<float> f(2);
  std::vector<double> out_d(n), dx_d(n);
  std::vector<float> out_f(n), dx_f(n);
  d.swish_dropout_forward(out_d.data(), x.data(), 0.1f, 3, 0, n);
  f.swish_dropout_forward(out_f.data(), x_f.data(), 0.1f, 3, 0, n);
  EXPECT_LT(relative_error(testing::to_double(out_f), out_d), testing::kFloatTolerance);
  d.swish_dropout_backward(dx_d.data(), g.data(), x.data(), 0.1f, 3, 0, n);
  f.swish_dropout_backward(dx_f.data(), g_f.data(), x_f.data(), 0.1f, 3, 0, n);
  EXPECT_LT(relative_error(testing::to_double(dx_f), dx_d), testing::kFloatTolerance);
  cpu_glu_forward(out_d.data(), x.data(), N, C);
  cpu_glu_forward(out_f.data(), x_f.data(), N, C);
  EXPECT_LT(relative_error(testing::to_double(out_f), out_d), testing::kFloatTolerance);
  cpu_glu_backward(dx_d.data(), g.data(), x.data(), N, C);
  cpu_glu_backward(dx_f.data(), g_f.data(), x_f.data(), N, C);
  EXPECT_LT(relative_error(testing::to_double(dx_f), dx_d), testing::kFloatTolerance);
}

}  // namespace
}  // namespace mpiasr
