// Per-element activation math shared by the CPU and CUDA backends (float or
// double arithmetic; the CUDA backend converts half to float around them).
//
//   relu(x)     = max(x, 0)                 relu'(x)  = [x > 0]
//   sigmoid(x)  = 1 / (1 + e^-x)            sigmoid'  = s (1 - s)
//   swish(x)    = x sigmoid(x)              swish'(x) = s (1 + x (1 - s))
//   glu(a, b)   = a sigmoid(b)              d/da = s, d/db = a s (1 - s)
//
// sigmoid is evaluated without overflow for either sign of x.
#pragma once

#include <math.h>

#include "kernels/hd.h"

namespace mpiasr {

MPIASR_HD float hd_exp(float x) {
  return expf(x);
}
MPIASR_HD double hd_exp(double x) {
  return exp(x);
}

template <typename T>
MPIASR_HD T relu(T x) {
  return x > T(0) ? x : T(0);
}

// d relu / dx times the upstream gradient dy.
template <typename T>
MPIASR_HD T relu_grad(T x, T dy) {
  return x > T(0) ? dy : T(0);
}

template <typename T>
MPIASR_HD T sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + hd_exp(-x));
  T e = hd_exp(x);
  return e / (T(1) + e);
}

template <typename T>
MPIASR_HD T swish(T x) {
  return x * sigmoid(x);
}

template <typename T>
MPIASR_HD T swish_grad(T x, T dy) {
  T s = sigmoid(x);
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
  T s = sigmoid(b);
  *da = dy * s;
  *db = dy * a * s * (T(1) - s);
}

}  // namespace mpiasr
