// Test helpers for the CPU kernels: random tensors, central finite
// differences, and error norms.
//
// A backward pass is checked through the scalar L = sum_i g[i] y[i] with a
// fixed random upstream gradient g: dL/dx computed by the backward pass with
// dout = g must equal (L(x + h e_j) - L(x - h e_j)) / 2h for every element j.
#pragma once

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <vector>

namespace mpiasr::testing {

// n values uniform in [lo, hi).
inline std::vector<double> random_vector(size_t n, std::mt19937_64& rng, double lo = -1.0,
                                         double hi = 1.0) {
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> x(n);
  for (double& v : x) v = dist(rng);
  return x;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i) sum += a[i] * b[i];
  return sum;
}

// Central differences of loss() with respect to every element of x (which
// loss() reads), restoring x afterwards.
inline std::vector<double> numeric_gradient(std::vector<double>& x,
                                            const std::function<double()>& loss, double h = 1e-6) {
  std::vector<double> grad(x.size());
  for (size_t j = 0; j < x.size(); ++j) {
    const double saved = x[j];
    x[j] = saved + h;
    const double plus = loss();
    x[j] = saved - h;
    const double minus = loss();
    x[j] = saved;
    grad[j] = (plus - minus) / (2 * h);
  }
  return grad;
}

// max_i |a_i - b_i| / max_i |b_i|: the error relative to the reference b's scale.
inline double relative_error(const std::vector<double>& a, const std::vector<double>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = std::max(diff, std::abs(a[i] - b[i]));
    scale = std::max(scale, std::abs(b[i]));
  }
  return scale > 0 ? diff / scale : diff;
}

// Element-wise difference a - b (to check accumulated gradients).
inline std::vector<double> minus(const std::vector<double>& a, const std::vector<double>& b) {
  std::vector<double> out(a.size());
  for (size_t i = 0; i < a.size(); ++i) out[i] = a[i] - b[i];
  return out;
}

inline std::vector<float> to_float(const std::vector<double>& x) {
  return std::vector<float>(x.begin(), x.end());
}

inline std::vector<double> to_double(const std::vector<float>& x) {
  return std::vector<double>(x.begin(), x.end());
}

// Tolerances: finite differences in double, and float against double.
constexpr double kGradTolerance = 1e-6;
constexpr double kFloatTolerance = 1e-5;

}  // namespace mpiasr::testing
