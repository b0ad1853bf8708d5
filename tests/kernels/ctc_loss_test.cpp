// CTC loss and gradient against brute force: p(y|x) is the sum, over every
// length-T path of tokens that collapses (merge repeats, drop blanks) to y, of
// the product of the frames' softmax probabilities; the gradient w.r.t. the
// logits is checked by central differences of that brute-force loss.
#include "kernels/cpu/ctc_loss.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "src/base/error.h"

namespace mpiasr {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> log_softmax(const std::vector<double>& logits, int T, int V) {
  std::vector<double> out(logits.size());
  for (int t = 0; t < T; ++t) {
    double hi = logits[t * V];
    for (int k = 1; k < V; ++k) hi = std::max(hi, logits[t * V + k]);
    double sum = 0;
    for (int k = 0; k < V; ++k) sum += std::exp(logits[t * V + k] - hi);
    for (int k = 0; k < V; ++k) out[t * V + k] = logits[t * V + k] - hi - std::log(sum);
  }
  return out;
}

std::vector<int32_t> collapse(const std::vector<int32_t>& path) {
  std::vector<int32_t> out;
  for (size_t t = 0; t < path.size(); ++t)
    if (path[t] != 0 && (t == 0 || path[t] != path[t - 1])) out.push_back(path[t]);
  return out;
}

// -log of the sum over all V^T paths collapsing to y of prod_t softmax_t(path_t).
double brute_force_loss(const std::vector<double>& logits, const std::vector<int32_t>& y, int T,
                        int V) {
  const std::vector<double> lp = log_softmax(logits, T, V);
  double p = 0;
  std::vector<int32_t> path(T, 0);
  while (true) {
    if (collapse(path) == y) {
      double log_prod = 0;
      for (int t = 0; t < T; ++t) log_prod += lp[t * V + path[t]];
      p += std::exp(log_prod);
    }
    int t = 0;  // next path: count in base V
    while (t < T && ++path[t] == V) path[t++] = 0;
    if (t == T) break;
  }
  return -std::log(p);
}

std::vector<double> random_logits(int T, int V, std::mt19937& rng) {
  std::normal_distribution<double> normal(0.0, 1.5);
  std::vector<double> logits(T * V);
  for (double& x : logits) x = normal(rng);
  return logits;
}

struct CtcResult {
  double loss;
  std::vector<double> dlogits;
};

CtcResult run_ctc(const std::vector<double>& logits, const std::vector<int32_t>& y, int T, int V,
                  double scale = 1.0) {
  const std::vector<double> lp = log_softmax(logits, T, V);
  CtcResult result{0, std::vector<double>(T * V, 123.0)};
  const int32_t target_length = static_cast<int32_t>(y.size()), input_length = T;
  cpu_ctc_loss<double>(&result.loss, result.dlogits.data(), lp.data(), y.data(), &target_length,
                       &input_length, &scale, 1, T, V);
  return result;
}

struct Case {
  int T, V;
  std::vector<int32_t> y;
};

// Targets: empty, single, distinct, repeated (needs a blank), mixed, all the same.
const std::vector<Case> kCases = {
    {4, 3, {}},        {5, 3, {1}},          {5, 4, {1, 2}},    {5, 3, {2, 2}}, {6, 4, {1, 2, 1}},
    {6, 3, {1, 1, 1}}, {6, 4, {3, 1, 3, 2}}, {3, 4, {2, 3, 1}}, {1, 2, {1}},    {1, 3, {}},
};

TEST(CtcLoss, LossMatchesBruteForce) {
  std::mt19937 rng(1);
  for (const Case& c : kCases) {
    const std::vector<double> logits = random_logits(c.T, c.V, rng);
    const double expected = brute_force_loss(logits, c.y, c.T, c.V);
    EXPECT_NEAR(run_ctc(logits, c.y, c.T, c.V).loss, expected, 1e-12 * std::abs(expected))
        << "T=" << c.T << " V=" << c.V << " L=" << c.y.size();
  }
}

TEST(CtcLoss, GradientMatchesFiniteDifferencesOfBruteForce) {
  std::mt19937 rng(2);
  const double h = 1e-5;
  for (const Case& c : kCases) {
    std::vector<double> logits = random_logits(c.T, c.V, rng);
    const CtcResult result = run_ctc(logits, c.y, c.T, c.V);
    for (int i = 0; i < c.T * c.V; ++i) {
      const double saved = logits[i];
      logits[i] = saved + h;
      const double up = brute_force_loss(logits, c.y, c.T, c.V);
      logits[i] = saved - h;
      const double down = brute_force_loss(logits, c.y, c.T, c.V);
      logits[i] = saved;
      const double numeric = (up - down) / (2 * h);
      EXPECT_NEAR(result.dlogits[i], numeric, 1e-6 * std::max(1.0, std::abs(numeric)))
          << "T=" << c.T << " V=" << c.V << " L=" << c.y.size() << " element " << i;
    }
  }
}

TEST(CtcLoss, GradientRowsAreSoftmaxMinusOccupancy) {
  // Each frame's occupancy sums to 1, as does its softmax: rows sum to 0. Long
  // and tight cases too (brute force cannot reach them): 200 frames for
  // 90 labels with repeats, and 24 frames for a target that needs exactly 24.
  std::mt19937 rng(3);
  std::uniform_int_distribution<int32_t> token(1, 3);
  std::vector<int32_t> long_target(90), tight_target(15, 1);
  for (int32_t& k : long_target) k = token(rng);
  for (int i = 0; i < 5; ++i) tight_target[i] = 2 + i % 2;  // 2 3 2 3 2 1 x10: 9 repeats
  const std::vector<Case> cases = {{6, 4, {1, 2, 2}}, {200, 5, long_target}, {24, 4, tight_target}};
  for (const Case& c : cases) {
    const CtcResult result = run_ctc(random_logits(c.T, c.V, rng), c.y, c.T, c.V);
    ASSERT_TRUE(std::isfinite(result.loss)) << "T=" << c.T;
    for (int t = 0; t < c.T; ++t) {
      double sum = 0;
      for (int k = 0; k < c.V; ++k) sum += result.dlogits[t * c.V + k];
      EXPECT_NEAR(sum, 0.0, 1e-12) << "T=" << c.T << " frame " << t;
    }
  }
}

TEST(CtcLoss, InfeasibleGivesInfinityAndZeroGradient) {
  std::mt19937 rng(4);
  // {1, 1, 1} needs 5 frames (blanks between repeats); {1, 2, 3, 1} needs 4.
  const std::vector<Case> infeasible = {
      {3, 3, {1, 1, 1}}, {4, 2, {1, 1, 1}}, {3, 4, {1, 2, 3, 1}}, {2, 3, {2, 2}}};
  for (const Case& c : infeasible) {
    const std::vector<double> logits = random_logits(c.T, c.V, rng);
    EXPECT_EQ(brute_force_loss(logits, c.y, c.T, c.V), kInf);
    const CtcResult result = run_ctc(logits, c.y, c.T, c.V);
    EXPECT_EQ(result.loss, kInf);
    for (double g : result.dlogits) EXPECT_EQ(g, 0.0);
  }
}

TEST(CtcLoss, EmptyInput) {
  // No frames: the empty path has probability 1 for the empty target and
  // cannot produce any other; padded frames still get a zero gradient.
  const int T = 2, V = 3;
  const std::vector<double> lp(2 * T * V, std::log(1.0 / V));
  const std::vector<int32_t> targets = {1}, target_lengths = {0, 1}, input_lengths = {0, 0};
  const std::vector<double> scales = {1.0, 1.0};
  std::vector<double> losses(2), dlogits(2 * T * V, 5.0);
  cpu_ctc_loss<double>(losses.data(), dlogits.data(), lp.data(), targets.data(),
                       target_lengths.data(), input_lengths.data(), scales.data(), 2, T, V);
  EXPECT_EQ(losses[0], 0.0);
  EXPECT_EQ(losses[1], kInf);
  for (double g : dlogits) EXPECT_EQ(g, 0.0);
}

TEST(CtcLoss, GradScaleMultipliesGradientNotLoss) {
  std::mt19937 rng(5);
  const std::vector<double> logits = random_logits(5, 3, rng);
  const CtcResult one = run_ctc(logits, {1, 2}, 5, 3, 1.0);
  const CtcResult scaled = run_ctc(logits, {1, 2}, 5, 3, 0.25);
  EXPECT_EQ(scaled.loss, one.loss);
  for (size_t i = 0; i < one.dlogits.size(); ++i)
    EXPECT_NEAR(scaled.dlogits[i], 0.25 * one.dlogits[i], 1e-15);
}

TEST(CtcLoss, PaddedBatchEqualsOneUtteranceAtATime) {
  std::mt19937 rng(6);
  const int B = 4, T = 6, V = 4;
  const std::vector<int32_t> input_lengths = {6, 3, 5, 2};
  const std::vector<std::vector<int32_t>> ys = {{1, 2, 1}, {3}, {2, 2}, {}};
  const std::vector<double> scales = {1.0, 0.5, 2.0, 1.0};
  // Padding frames hold random log-probs: they must be ignored.
  std::vector<double> lp(B * T * V);
  std::vector<int32_t> targets, target_lengths;
  for (int b = 0; b < B; ++b) {
    const std::vector<double> frame_lp = log_softmax(random_logits(T, V, rng), T, V);
    std::copy(frame_lp.begin(), frame_lp.end(), lp.begin() + b * T * V);
    targets.insert(targets.end(), ys[b].begin(), ys[b].end());
    target_lengths.push_back(static_cast<int32_t>(ys[b].size()));
  }
  std::vector<double> losses(B), dlogits(B * T * V, 99.0);
  cpu_ctc_loss<double>(losses.data(), dlogits.data(), lp.data(), targets.data(),
                       target_lengths.data(), input_lengths.data(), scales.data(), B, T, V);
  for (int b = 0; b < B; ++b) {
    const int Tb = input_lengths[b];
    double loss;
    std::vector<double> grad(Tb * V);
    cpu_ctc_loss<double>(&loss, grad.data(), lp.data() + b * T * V, ys[b].data(),
                         &target_lengths[b], &input_lengths[b], &scales[b], 1, Tb, V);
    EXPECT_EQ(losses[b], loss) << "utterance " << b;
    for (int i = 0; i < Tb * V; ++i) EXPECT_EQ(dlogits[b * T * V + i], grad[i]);
    for (int i = Tb * V; i < T * V; ++i) EXPECT_EQ(dlogits[b * T * V + i], 0.0);
  }
}

TEST(CtcLoss, FloatMatchesDouble) {
  std::mt19937 rng(7);
  const int T = 6, V = 4;
  const std::vector<int32_t> y = {1, 3, 3};
  const std::vector<double> lp = log_softmax(random_logits(T, V, rng), T, V);
  const std::vector<float> lp_float(lp.begin(), lp.end());
  const std::vector<double> lp_rounded(lp_float.begin(), lp_float.end());
  std::vector<float> grad_float(T * V);
  std::vector<double> grad(T * V);
  const int32_t L = 3, frames = T;
  const double scale = 1.0;
  double loss_double, loss_float;
  cpu_ctc_loss<double>(&loss_double, grad.data(), lp_rounded.data(), y.data(), &L, &frames, &scale,
                       1, T, V);
  cpu_ctc_loss<float>(&loss_float, grad_float.data(), lp_float.data(), y.data(), &L, &frames,
                      &scale, 1, T, V);
  EXPECT_DOUBLE_EQ(loss_float, loss_double);  // same double recursion on the same inputs
  for (int i = 0; i < T * V; ++i) EXPECT_EQ(grad_float[i], static_cast<float>(grad[i]));
}

TEST(CtcLoss, LossOnlyWhenNoGradientRequested) {
  std::mt19937 rng(8);
  const std::vector<double> logits = random_logits(5, 3, rng);
  const std::vector<double> lp = log_softmax(logits, 5, 3);
  const std::vector<int32_t> y = {2, 1};
  const int32_t L = 2, frames = 5;
  double loss;
  cpu_ctc_loss<double>(&loss, nullptr, lp.data(), y.data(), &L, &frames, nullptr, 1, 5, 3);
  EXPECT_NEAR(loss, brute_force_loss(logits, y, 5, 3), 1e-12);
}

// Pushed in pieces of 1 to 4 frames, float log-probs: the loss
// cpu_ctc_loss gives on all the frames at once, for every target of kCases
// (infeasible and empty ones included) and longer ones, and brute force
// where it is cheap.
TEST(CtcForwardLoss, PiecesGiveTheWholeUtterancesLoss) {
  std::mt19937 rng(9);
  std::vector<Case> cases = kCases;
  cases.push_back({40, 6, {1, 2, 2, 3, 5, 4, 4, 4, 1, 2}});
  cases.push_back({7, 5, {1, 2, 3, 4, 1, 2, 3, 4}});  // infeasible
  for (const Case& c : cases) {
    const std::vector<double> lp = log_softmax(random_logits(c.T, c.V, rng), c.T, c.V);
    const std::vector<float> lp_float(lp.begin(), lp.end());
    const int32_t L = int32_t(c.y.size()), frames = c.T;
    double expected = 0;
    cpu_ctc_loss<float>(&expected, nullptr, lp_float.data(), c.y.data(), &L, &frames, nullptr, 1,
                        c.T, c.V);
    CtcForwardLoss forward(c.y, c.T);
    for (int t = 0, piece = 1; t < c.T; t += piece, piece = piece % 4 + 1) {
      forward.push(lp_float.data() + size_t(t) * size_t(c.V), std::min(piece, c.T - t), c.V);
    }
    EXPECT_EQ(forward.loss(), expected) << "T=" << c.T << " V=" << c.V << " L=" << L;
    if (c.T <= 6) {
      std::vector<double> rounded(lp_float.begin(), lp_float.end());
      EXPECT_NEAR(forward.loss(), brute_force_loss(rounded, c.y, c.T, c.V),
                  1e-5 * std::max(1.0, std::abs(forward.loss())));
    }
  }
  CtcForwardLoss unfinished({1}, 3);
  EXPECT_THROW(unfinished.loss(), Error);
}

TEST(CtcLoss, RejectsBadTokensAndLengths) {
  const std::vector<double> lp(4 * 3, std::log(1.0 / 3));
  double loss;
  const double scale = 1.0;
  const int32_t blank_target[] = {0}, big_target[] = {3}, ok_target[] = {1};
  const int32_t one = 1, four = 4, five = 5;
  EXPECT_THROW(
      cpu_ctc_loss<double>(&loss, nullptr, lp.data(), blank_target, &one, &four, &scale, 1, 4, 3),
      Error);
  EXPECT_THROW(
      cpu_ctc_loss<double>(&loss, nullptr, lp.data(), big_target, &one, &four, &scale, 1, 4, 3),
      Error);
  EXPECT_THROW(
      cpu_ctc_loss<double>(&loss, nullptr, lp.data(), ok_target, &one, &five, &scale, 1, 4, 3),
      Error);
}

}  // namespace
}  // namespace mpiasr
