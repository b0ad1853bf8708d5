// exp(x) for float without branches, so loops that call it vectorize on any
// x86-64 target (and run unchanged on the GPU); double uses the C library.
//
//   n = round(x / ln 2),  r = x - n ln 2 (Cody-Waite: ln 2 split in two parts),
//   exp(r) = 1 + r + r^2 P(r) with Cephes' expf polynomial P of degree 5 on
//   |r| <= ln 2 / 2,  exp(x) = 2^n exp(r), 2^n built in the exponent bits.
// Max relative error 1.4 ulp on [-87, 88]. The scale exponent is clamped to
// [-127, 128], so results below about 2^-126 (x < -87.3) flush to 0 and
// x > 88.0 gives +inf (exp's own overflow is at 88.7); |x| > 100 is clamped
// to +-100 first, so +-inf give 0 and +inf; NaN stays NaN.
//
// Conditionals are written as integer masks: a float comparison inside a
// select keeps GCC from vectorizing unless -fno-trapping-math is given.
#pragma once

#include <math.h>

#include <cstdint>
#include <cstring>

#include "kernels/hd.h"

namespace mpiasr {

MPIASR_HD uint32_t float_bits(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  return u;
}

MPIASR_HD float bits_float(uint32_t u) {
  float x;
  memcpy(&x, &u, sizeof x);
  return x;
}

// a where mask is all ones, b where it is zero.
MPIASR_HD float select_bits(uint32_t mask, float a, float b) {
  return bits_float((float_bits(a) & mask) | (float_bits(b) & ~mask));
}

MPIASR_HD float branchless_exp(float x) {
  constexpr int32_t kMagnitudeLimit = 0x42c80000;  // 100.0f
  constexpr int32_t kInfinity = 0x7f800000;
  const uint32_t xb = float_bits(x);
  const int32_t magnitude = int32_t(xb & 0x7fffffffu);
  const int32_t clamp = -int32_t((magnitude > kMagnitudeLimit) & (magnitude <= kInfinity));
  x = bits_float(uint32_t((magnitude & ~clamp) | (kMagnitudeLimit & clamp)) | (xb & 0x80000000u));

  constexpr float kShifter = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  const float shifted = x * 1.44269504088896341f + kShifter;
  const float n = shifted - kShifter;
  float r = x - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;

  // n as an integer, from the low bits of `shifted` (whose ulp is 1): no
  // float-to-int conversion, which is undefined for NaN. NaN gives some k,
  // clamped below, and p stays NaN.
  int32_t k = int32_t(float_bits(shifted)) - int32_t(float_bits(kShifter));
  k = k < -127 ? -127 : k;
  k = k > 128 ? 128 : k;
  return p * bits_float(uint32_t(k + 127) << 23);
}

MPIASR_HD double branchless_exp(double x) {
  return exp(x);
}

}  // namespace mpiasr
