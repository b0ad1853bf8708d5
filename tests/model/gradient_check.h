// Central finite differences for the model tests (fp64):
//   numeric = (loss(x + h) - loss(x - h)) / (2 h)
// compared with the analytic gradient at the largest-gradient element and at
// a few random elements of a tensor.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace mpiasr::testing {

constexpr double kFiniteDifferenceStep = 1e-5;
constexpr double kRelativeTolerance = 1e-6;
constexpr double kAbsoluteFloor = 1e-9;  // both gradients below this count as zero

// The difference quotients of loss() at *x with step h: central, left and right.
struct DifferenceQuotients {
  double central, left, right;
};

inline DifferenceQuotients difference_quotients(const std::function<double()>& loss, double* x,
                                                double h = kFiniteDifferenceStep) {
  const double saved = *x;
  const double center = loss();
  *x = saved + h;
  const double plus = loss();
  *x = saved - h;
  const double minus = loss();
  *x = saved;
  return {(plus - minus) / (2.0 * h), (center - minus) / h, (plus - center) / h};
}

// A ReLU kink within h of x makes the left and right quotients disagree far
// beyond their O(h) curvature difference; such an element cannot be checked
// by differences and is skipped.
inline bool kink_within_step(const DifferenceQuotients& q) {
  return std::abs(q.left - q.right) > 1e-3 * std::max(std::abs(q.left), std::abs(q.right)) + 1e-7;
}

// Indices to check in a tensor of n elements: the largest |analytic| and up
// to `samples` distinct random others.
inline std::vector<size_t> indices_to_check(const double* analytic, size_t n, int samples,
                                            uint64_t seed) {
  std::vector<size_t> picked;
  size_t largest = 0;
  for (size_t i = 1; i < n; ++i) {
    if (std::abs(analytic[i]) > std::abs(analytic[largest])) largest = i;
  }
  picked.push_back(largest);
  std::mt19937_64 rng(seed);
  for (int s = 0; s < samples && picked.size() < n; ++s) {
    size_t i = size_t(rng() % n);
    if (std::find(picked.begin(), picked.end(), i) == picked.end()) picked.push_back(i);
  }
  return picked;
}

// Checks analytic[i] against central differences of loss() in values[i] at
// the largest-gradient element and `samples` random ones; an element next to
// a kink is replaced by another random one (at most as many as are checked).
// Returns the largest relative error seen.
inline double check_gradient(const std::string& what, const double* analytic, double* values,
                             size_t n, const std::function<double()>& loss, int samples,
                             uint64_t seed) {
  const size_t wanted = std::min(n, size_t(samples) + 1);
  const std::vector<size_t> candidates = indices_to_check(analytic, n, 2 * samples + 2, seed);
  double worst = 0.0;
  size_t checked = 0, skipped = 0;
  for (size_t i : candidates) {
    if (checked == wanted) break;
    const DifferenceQuotients quotients = difference_quotients(loss, values + i);
    if (kink_within_step(quotients)) {
      ++skipped;
      continue;
    }
    ++checked;
    const double numeric = quotients.central;
    const double scale = std::max(std::abs(analytic[i]), std::abs(numeric));
    const double error = std::abs(analytic[i] - numeric);
    if (scale > kAbsoluteFloor) worst = std::max(worst, error / scale);
    EXPECT_LE(error, kRelativeTolerance * scale + kAbsoluteFloor)
        << what << "[" << i << "]: analytic " << analytic[i] << ", numeric " << numeric;
  }
  EXPECT_EQ(checked, wanted) << what << ": " << skipped << " elements next to a kink";
  EXPECT_LE(skipped, checked) << what << ": too many elements next to a kink";
  return worst;
}

inline std::vector<double> random_values(size_t n, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, scale);
  std::vector<double> values(n);
  for (double& v : values) v = normal(rng);
  return values;
}

}  // namespace mpiasr::testing
