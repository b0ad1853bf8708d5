// AdamW against values worked out by hand from the formula
//   m = b1 m + (1 - b1) g ; v = b2 v + (1 - b2) g^2
//   w -= lr * ( (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps) + wd * w )
// with constants exact in binary (lr 0.125, b1 0.5, b2 0.75, eps 0.125,
// wd 0.25), so float and double runs see the same hyper-parameters; plus the
// gradient-norm helper.
#include "kernels/cpu/adamw.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace mpiasr {
namespace {

constexpr float kLr = 0.125f, kBeta1 = 0.5f, kBeta2 = 0.75f, kEps = 0.125f, kWd = 0.25f;

// The coefficients of step t (bias corrections 1 - beta^t) with this grad_scale.
template <typename Real>
AdamWCoefficients<Real> coefficients(int t, float grad_scale) {
  return {Real(kLr),
          Real(kBeta1),
          Real(kBeta2),
          Real(kEps),
          Real(kWd),
          Real(grad_scale),
          Real(1.0 - std::pow(double(kBeta1), t)),
          Real(1.0 - std::pow(double(kBeta2), t))};
}

// Step 1, w = (1, -2, 0.5), g = (0.25, -0.5, 0); 1 - b1 = 0.5, 1 - b2 = 0.25:
//   m = (0.125, -0.25, 0)        v = (0.015625, 0.0625, 0)
//   m^ = m / 0.5 = (0.25, -0.5, 0)   v^ = v / 0.25 = (0.0625, 0.25, 0), sqrt = (0.25, 0.5, 0)
//   m^ / (sqrt + eps) = (0.25 / 0.375, -0.5 / 0.625, 0) = (2/3, -0.8, 0)
//   wd * w = (0.25, -0.5, 0.125)
//   w = (1 - 0.125 (2/3 + 0.25), -2 - 0.125 (-0.8 - 0.5), 0.5 - 0.125 * 0.125)
//     = (0.885416..., -1.8375, 0.484375)
const double kW1[3] = {1.0 - 0.125 * (2.0 / 3.0 + 0.25), -2.0 - 0.125 * (-0.8 - 0.5),
                       0.5 - 0.125 * 0.125};
const double kM1[3] = {0.125, -0.25, 0.0}, kV1[3] = {0.015625, 0.0625, 0.0};

// Step 2, g = (0.25, 0.5, -0.125); 1 - b1^2 = 0.75, 1 - b2^2 = 0.4375:
//   m = 0.5 m + 0.5 g = (0.1875, 0.125, -0.0625)
//   v = 0.75 v + 0.25 g^2 = (0.02734375, 0.109375, 0.00390625)
//   m^ = m / 0.75 = (0.25, 1/6, -1/12)   v^ = v / 0.4375 = (0.0625, 0.25, 1/112)
//   m^ / (sqrt + eps) = (0.25 / 0.375, (1/6) / 0.625, (-1/12) / (sqrt(1/112) + 0.125))
//   w -= 0.125 (that + 0.25 w1)
const double kW2[3] = {
    kW1[0] - 0.125 * (0.25 / 0.375 + 0.25 * kW1[0]),
    kW1[1] - 0.125 * ((1.0 / 6.0) / 0.625 + 0.25 * kW1[1]),
    kW1[2] - 0.125 * ((-1.0 / 12.0) / (std::sqrt(1.0 / 112.0) + 0.125) + 0.25 * kW1[2])};
const double kM2[3] = {0.1875, 0.125, -0.0625}, kV2[3] = {0.02734375, 0.109375, 0.00390625};

template <typename Real>
void check_two_steps(double tolerance) {
  std::vector<Real> w = {1, -2, 0.5}, w_act(3, Real(7)), m(3, 0), v(3, 0);
  const std::vector<Real> g1 = {0.25, -0.5, 0}, g2 = {0.25, 0.5, -0.125};
  cpu_adamw_step<Real>(w.data(), w_act.data(), g1.data(), m.data(), v.data(), 3,
                       coefficients<Real>(1, 1.0f));
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(w[i], kW1[i], tolerance) << i;
    EXPECT_NEAR(m[i], kM1[i], tolerance) << i;
    EXPECT_NEAR(v[i], kV1[i], tolerance) << i;
    EXPECT_EQ(w_act[i], w[i]) << i;
  }
  cpu_adamw_step<Real>(w.data(), w_act.data(), g2.data(), m.data(), v.data(), 3,
                       coefficients<Real>(2, 1.0f));
  for (int i = 0; i < 3; ++i) {
    EXPECT_NEAR(w[i], kW2[i], tolerance) << i;
    EXPECT_NEAR(m[i], kM2[i], tolerance) << i;
    EXPECT_NEAR(v[i], kV2[i], tolerance) << i;
    EXPECT_EQ(w_act[i], w[i]) << i;
  }
}

TEST(AdamW, TwoStepsMatchHandArithmeticDouble) {
  check_two_steps<double>(1e-15);
}
TEST(AdamW, TwoStepsMatchHandArithmeticFloat) {
  check_two_steps<float>(1e-6);
}

TEST(AdamW, WeightDecayIsDecoupled) {
  // Zero gradient: the moments stay 0 and w shrinks by exactly (1 - lr wd).
  std::vector<double> w = {1.5, -4.0, 0.0}, m(3, 0), v(3, 0);
  const std::vector<double> g(3, 0.0);
  cpu_adamw_step<double>(w.data(), nullptr, g.data(), m.data(), v.data(), 3,
                         coefficients<double>(1, 1.0f));
  const double shrink = 1.0 - 0.125 * 0.25;
  EXPECT_EQ(w[0], 1.5 * shrink);
  EXPECT_EQ(w[1], -4.0 * shrink);
  EXPECT_EQ(w[2], 0.0);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(m[i], 0.0);
    EXPECT_EQ(v[i], 0.0);
  }
}

TEST(AdamW, GradScaleUnscalesGradients) {
  // Gradients scaled by a loss scale of 1024 with grad_scale 1/1024 step
  // exactly like the unscaled gradients (powers of two are exact).
  std::vector<float> w1 = {1, -2, 0.5}, m1(3, 0), v1(3, 0);
  std::vector<float> w2 = w1, m2(3, 0), v2(3, 0);
  const std::vector<float> g = {0.25, -0.5, 0.0625}, g_scaled = {256, -512, 64};
  cpu_adamw_step<float>(w1.data(), nullptr, g.data(), m1.data(), v1.data(), 3,
                        coefficients<float>(1, 1.0f));
  cpu_adamw_step<float>(w2.data(), w2.data(), g_scaled.data(), m2.data(), v2.data(), 3,
                        coefficients<float>(1, 1.0f / 1024));
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(w2[i], w1[i]);
    EXPECT_EQ(m2[i], m1[i]);
    EXPECT_EQ(v2[i], v1[i]);
  }
}

// Each operation of the float update rounded on its own, as on a CPU without
// FMA: in double, then to float, which gives the float operation's result
// (53 >= 2 x 24 + 2 bits, so rounding twice rounds correctly for +, x, /
// and sqrt).
void round_each_step(float& w, float& m, float& v, float g, const AdamWCoefficients<float>& c) {
  const auto mul = [](float a, float b) { return float(double(a) * double(b)); };
  const auto add = [](float a, float b) { return float(double(a) + double(b)); };
  const auto sub = [](float a, float b) { return float(double(a) - double(b)); };
  const auto div = [](float a, float b) { return float(double(a) / double(b)); };
  const float gs = mul(g, c.grad_scale);
  m = add(mul(c.beta1, m), mul(sub(1.0f, c.beta1), gs));
  v = add(mul(c.beta2, v), mul(mul(sub(1.0f, c.beta2), gs), gs));
  const float m_hat = div(m, c.bias_correction1), v_hat = div(v, c.bias_correction2);
  const float root = float(std::sqrt(double(v_hat)));
  w = sub(w, mul(c.lr, add(div(m_hat, add(root, c.eps)), mul(c.weight_decay, w))));
}

// The float update gives the same bits on every x86-64 CPU, whichever
// instruction set its clone uses (adamw.cpp is built without FMA
// contraction), so data-parallel replicas on different nodes stay identical.
TEST(AdamW, FloatUpdateRoundsEveryOperationOnItsOwn) {
  const size_t n = 100003;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> w(n), m(n), v(n), g(n);
  for (size_t i = 0; i < n; ++i) {
    w[i] = normal(rng);
    m[i] = 0.1f * normal(rng);
    v[i] = 0.01f * std::abs(normal(rng));
    g[i] = normal(rng);
  }
  std::vector<float> w_ref = w, m_ref = m, v_ref = v;
  const AdamWCoefficients<float> c{3e-4f, 0.9f, 0.98f, 1e-9f, 1e-3f, 0.37f, 0.271f, 0.0394f};
  cpu_adamw_step<float>(w.data(), nullptr, g.data(), m.data(), v.data(), n, c);
  size_t mismatches = 0;
  for (size_t i = 0; i < n; ++i) {
    round_each_step(w_ref[i], m_ref[i], v_ref[i], g[i], c);
    mismatches += w[i] != w_ref[i] || m[i] != m_ref[i] || v[i] != v_ref[i];
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(SumSquares, MatchesClosedForm) {
  // sum_{i=1}^{n} i^2 = n (n + 1) (2n + 1) / 6; exact in double for n = 100000.
  const size_t n = 100000;
  std::vector<float> g(n);
  for (size_t i = 0; i < n; ++i) g[i] = static_cast<float>(i + 1);
  EXPECT_EQ(cpu_sum_squares<float>(g.data(), n), double(n) * (n + 1) * (2 * n + 1) / 6);
  const std::vector<double> small = {0.5, -1.5, 2.0};
  EXPECT_EQ(cpu_sum_squares<double>(small.data(), 3), 0.25 + 2.25 + 4.0);
  EXPECT_EQ(cpu_sum_squares<double>(small.data(), 0), 0.0);
}

TEST(SumSquares, AccumulatesInDouble) {
  // 2^20 values of 0.1f: a float accumulator drifts far from 2^20 * 0.1f^2.
  const size_t n = size_t(1) << 20;
  std::vector<float> g(n, 0.1f);
  const double expected = double(n) * double(0.1f) * double(0.1f);
  EXPECT_NEAR(cpu_sum_squares<float>(g.data(), n), expected, 1e-9 * expected);
}

// The documented order (adamw.h), written out one scalar addition at a time.
double sum_squares_in_documented_order(const std::vector<float>& g) {
  double sum = 0.0;
  for (size_t begin = 0; begin < g.size(); begin += kSumBlock) {
    const size_t end = std::min(g.size(), begin + kSumBlock);
    double lane[kSumLanes] = {};
    for (size_t i = begin; i < end; ++i) {
      const double square = double(g[i]) * double(g[i]);
      lane[(i - begin) % kSumLanes] += square;
    }
    for (size_t width = kSumLanes / 2; width > 0; width /= 2) {
      for (size_t j = 0; j < width; ++j) lane[j] += lane[j + width];
    }
    sum += lane[0];
  }
  return sum;
}

TEST(SumSquares, SameBitsForAnyThreadCountInTheDocumentedOrder) {
  // A gradient-sized tensor with a tail that fills neither a block nor a lane
  // row; values over 8 binades, so a different order shows in the low bits.
  const size_t n = 3 * kSumBlock * 41 + 13;
  std::vector<float> g(n);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-4, 4);
  for (float& x : g) x = std::ldexp(mantissa(rng), exponent(rng));
  const double expected = sum_squares_in_documented_order(g);
  const int threads_before = omp_get_max_threads();
  for (const int threads : {1, 2, 3}) {
    omp_set_num_threads(threads);
    EXPECT_EQ(cpu_sum_squares<float>(g.data(), n), expected) << threads << " threads";
  }
  omp_set_num_threads(threads_before);
  long double sequential = 0.0L;
  for (const float x : g) sequential += (long double)x * x;
  EXPECT_NEAR(expected, double(sequential), 1e-13 * double(sequential));
}

}  // namespace
}  // namespace mpiasr
