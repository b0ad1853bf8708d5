// Per-element activation math shared by the CPU and CUDA backends (float or
// double arithmetic; the CUDA backend converts half to float around them).
//
//   relu(x)     = max(x, 0)                 relu'(x)  = [x > 0]
//   sigmoid(x)  = 1 / (1 + e^-x)            sigmoid'  = s (1 - s)
//   swish(x)    = x sigmoid(x)              swish'(x) = s (1 + x (1 - s))
//   glu(a, b)   = a sigmoid(b)              d/da = s, d/db = a s (1 - s)
//
// sigmoid uses e = exp(-|x|) <= 1 for both signs: sigmoid(|x|) = 1 / (1 + e),
// sigmoid(-|x|) = e / (1 + e), so nothing overflows. The float versions select
// by the sign bit with integer masks (kernels/exp.h) so CPU loops vectorize;
// the double versions are the plain formulas (gradient checks).
#pragma once

#include <cstdint>

#include "kernels/exp.h"
#include "kernels/hd.h"

namespace mpiasr {

MPIASR_HD double relu(double x) {
  return x > 0.0 ? x : 0.0;
}

// Keeps x when it is positive or NaN (so NaN propagates), else 0.
MPIASR_HD float relu(float x) {
  const uint32_t xb = float_bits(x);
  const int32_t magnitude = int32_t(xb & 0x7fffffffu);
  const uint32_t keep = 0u - uint32_t((int32_t(xb) > 0) | (magnitude > 0x7f800000));
  return bits_float(xb & keep);
}

// d relu / dx times the upstream gradient dy.
MPIASR_HD double relu_grad(double x, double dy) {
  return x > 0.0 ? dy : 0.0;
}

MPIASR_HD float relu_grad(float x, float dy) {
  const uint32_t pass = 0u - uint32_t(int32_t(float_bits(x)) > 0);
  return bits_float(float_bits(dy) & pass);
}

MPIASR_HD double sigmoid(double x) {
  const double e = branchless_exp(x >= 0.0 ? -x : x);
  return x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

MPIASR_HD float sigmoid(float x) {
  const uint32_t xb = float_bits(x);
  const float e = branchless_exp(bits_float(xb | 0x80000000u));  // exp(-|x|)
  const float r = 1.0f / (1.0f + e);
  const uint32_t negative = 0u - (xb >> 31);
  return select_bits(negative, e * r, r);
}

template <typename T>
MPIASR_HD T swish(T x) {
  return x * sigmoid(x);
}

template <typename T>
MPIASR_HD T swish_grad(T x, T dy) {
  const T s = sigmoid(x);
  return dy * s * (T(1) + x * (T(1) - s));
}

// GLU: out = a * sigmoid(b) for the value half a and the gate half b.
template <typename T>
MPIASR_HD T glu(T a, T b) {
  return a * sigmoid(b);
}

// Gradients of GLU with respect to a and b, given the upstream gradient dy.
template <typename T>
MPIASR_HD void glu_grad(T a, T b, T dy, T* da, T* db) {
  const T s = sigmoid(b);
  *da = dy * s;
  *db = dy * a * s * (T(1) - s);
}

}  // namespace mpiasr
