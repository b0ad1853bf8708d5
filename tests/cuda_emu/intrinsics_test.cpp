// The emulator's fp16 and bf16 types, its vector types and math intrinsics
// (kernels/cuda_emu/simt.h) against references written from the formats
// themselves: a decoder of the bit pattern, round-to-nearest-even by search
// over all finite values of the format, and double arithmetic (exact for
// sums and products of halves and of bfloat16).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace mpiasr {
namespace {

uint16_t bits_of(__half h) {
  uint16_t u;
  std::memcpy(&u, &h, sizeof u);
  return u;
}

__half half_of(uint16_t u) {
  __half h;
  std::memcpy(&h, &u, sizeof h);
  return h;
}

// sign, 5 exponent bits (bias 15), 10 fraction bits; exponent 0 is subnormal.
double decode(uint16_t u) {
  const int sign = u >> 15, exponent = (u >> 10) & 31, fraction = u & 1023;
  double magnitude;
  if (exponent == 31) {
    magnitude = fraction ? std::numeric_limits<double>::quiet_NaN()
                         : std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(double(fraction), -24);
  } else {
    magnitude = std::ldexp(double(1024 + fraction), exponent - 25);
  }
  return sign ? -magnitude : magnitude;
}

// The patterns of the finite non-negative halves, in increasing order.
const std::vector<uint16_t>& finite_halves() {
  static const std::vector<uint16_t> halves = [] {
    std::vector<uint16_t> out;
    for (uint32_t u = 0; u < 0x7c00; ++u) out.push_back(uint16_t(u));
    return out;
  }();
  return halves;
}

// x rounded to the nearest half, ties to the even pattern; beyond the largest
// half by half an ulp (65520) it is infinite.
uint16_t round_to_half(double x) {
  if (std::isnan(x)) return 0x7e00;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  if (a >= 65520.0) return sign | 0x7c00;
  const std::vector<uint16_t>& h = finite_halves();
  auto above =
      std::lower_bound(h.begin(), h.end(), a, [](uint16_t u, double v) { return decode(u) < v; });
  if (above == h.end()) return sign | 0x7bff;  // in (65504, 65520): the largest half
  if (above == h.begin()) return sign | *above;
  const uint16_t hi = *above, lo = *(above - 1);
  const double d_lo = a - decode(lo), d_hi = decode(hi) - a;
  if (d_lo < d_hi) return sign | lo;
  if (d_hi < d_lo) return sign | hi;
  return sign | ((lo & 1) ? hi : lo);
}

TEST(Half, EveryPatternConvertsToItsExactFloat) {
  for (uint32_t u = 0; u < 65536; ++u) {
    const double expected = decode(uint16_t(u));
    const float got = __half2float(half_of(uint16_t(u)));
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << u;
    } else {
      EXPECT_EQ(double(got), expected) << u;
      EXPECT_EQ(std::signbit(got), std::signbit(expected)) << u;
    }
  }
}

// Every half, every midpoint between neighbours (a tie) and the floats just
// beside each midpoint round as round-to-nearest-even says.
TEST(Half, FloatsRoundToNearestEven) {
  const std::vector<uint16_t>& h = finite_halves();
  std::vector<float> probes = {
      65504.0f, 65519.996f, 65520.0f, 1e9f, 1e-9f, 0.0f, std::numeric_limits<float>::infinity()};
  for (size_t i = 0; i + 1 < h.size(); ++i) {
    const float lo = float(decode(h[i])), hi = float(decode(h[i + 1]));
    const float mid = float((double(lo) + double(hi)) / 2);  // exact in float
    probes.insert(probes.end(), {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, hi)});
  }
  for (float p : probes) {
    for (float x : {p, -p}) {
      EXPECT_EQ(bits_of(__float2half_rn(x)), round_to_half(x)) << x;
      EXPECT_EQ(bits_of(__float2half(x)), round_to_half(x)) << x;
      EXPECT_EQ(bits_of(__half(x)), round_to_half(x)) << x;
    }
  }
  EXPECT_TRUE(__hisnan(__float2half_rn(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(bits_of(__half(1.0 / 3.0)), round_to_half(1.0 / 3.0));
}

TEST(Half, ArithmeticIsCorrectlyRounded) {
  std::mt19937 random(7);
  std::uniform_int_distribution<int> pattern(0, 0x7bff);
  int fma_off_by_one = 0;
  for (int i = 0; i < 20000; ++i) {
    const uint16_t ua = uint16_t(pattern(random) | (random() % 2 ? 0x8000 : 0));
    const uint16_t ub = uint16_t(pattern(random) | (random() % 2 ? 0x8000 : 0));
    const uint16_t uc = uint16_t(pattern(random) | (random() % 2 ? 0x8000 : 0));
    const __half a = half_of(ua), b = half_of(ub), c = half_of(uc);
    const double x = decode(ua), y = decode(ub), z = decode(uc);
    EXPECT_EQ(bits_of(__hadd(a, b)), round_to_half(x + y)) << x << " + " << y;
    EXPECT_EQ(bits_of(__hsub(a, b)), round_to_half(x - y)) << x << " - " << y;
    EXPECT_EQ(bits_of(__hmul(a, b)), round_to_half(x * y)) << x << " * " << y;
    EXPECT_EQ(bits_of(a + b), round_to_half(x + y));
    EXPECT_EQ(bits_of(a * b), round_to_half(x * y));
    if (y != 0.0) {
      EXPECT_EQ(bits_of(__hdiv(a, b)), round_to_half(x / y)) << x << " / " << y;
      EXPECT_EQ(bits_of(a / b), round_to_half(x / y));
    }
    // Rounded twice (float, then half): within one ulp, and rarely off.
    const int fma_error = std::abs(int(bits_of(__hfma(a, b, c)) & 0x7fff) -
                                   int(round_to_half(std::fma(x, y, z)) & 0x7fff));
    EXPECT_LE(fma_error, 1) << x << " * " << y << " + " << z;
    fma_off_by_one += fma_error;
    EXPECT_EQ(bits_of(__hneg(a)), uint16_t(ua ^ 0x8000));
    EXPECT_EQ(bits_of(-a), uint16_t(ua ^ 0x8000));
    EXPECT_EQ(bits_of(__hmax(a, b)), x >= y ? ua : ub);
    EXPECT_EQ(bits_of(__hmin(a, b)), x <= y ? ua : ub);

    const __half2 p = __halves2half2(a, b), q = __halves2half2(c, a);
    const __half2 sum = __hadd2(p, q), difference = __hsub2(p, q), product = __hmul2(p, q);
    EXPECT_EQ(bits_of(sum.x), bits_of(__hadd(a, c)));
    EXPECT_EQ(bits_of(sum.y), bits_of(__hadd(b, a)));
    EXPECT_EQ(bits_of(difference.y), bits_of(__hsub(b, a)));
    EXPECT_EQ(bits_of(product.x), bits_of(__hmul(a, c)));
    if (z != 0.0 && x != 0.0) {
      const __half2 quotient = __h2div(p, q);
      EXPECT_EQ(bits_of(quotient.x), bits_of(__hdiv(a, c)));
      EXPECT_EQ(bits_of(quotient.y), bits_of(__hdiv(b, a)));
    }
    const __half2 fused = __hfma2(p, q, p);
    EXPECT_EQ(bits_of(fused.y), bits_of(__hfma(b, a, b)));
    const float2 f = __half22float2(p);
    EXPECT_EQ(double(f.x), x);
    EXPECT_EQ(double(f.y), y);
    EXPECT_EQ(double(__low2float(p)), x);
    EXPECT_EQ(double(__high2float(p)), y);
  }
  EXPECT_LT(fma_off_by_one, 20);
  const __half2 pair = __floats2half2_rn(0.1f, -3.3f), same = __float2half2_rn(0.1f);
  EXPECT_EQ(bits_of(pair.x), round_to_half(double(0.1f)));
  EXPECT_EQ(bits_of(pair.y), round_to_half(double(-3.3f)));
  EXPECT_EQ(bits_of(same.y), round_to_half(double(0.1f)));
}

// exp, log, sqrt and 1/sqrt of halves: the float result rounded once.
TEST(Half, FunctionsWithinOneUlp) {
  for (uint32_t u = 0; u < 0x7c00; u += 7) {
    const __half h = half_of(uint16_t(u));
    const double x = decode(uint16_t(u));
    auto ulps = [](__half got, double exact) {
      return std::abs(int(bits_of(got)) - int(round_to_half(exact)));
    };
    if (x < 11.0) {
      EXPECT_LE(ulps(hexp(h), std::exp(x)), 1) << x;
      EXPECT_LE(ulps(h2exp(__halves2half2(h, h)).y, std::exp(x)), 1) << x;
    }
    if (x > 0.0) {
      EXPECT_LE(ulps(hlog(h), std::log(x)), 1) << x;
      EXPECT_LE(ulps(hrsqrt(h), 1.0 / std::sqrt(x)), 1) << x;
    }
    EXPECT_LE(ulps(hsqrt(h), std::sqrt(x)), 1) << x;
  }
}

// ---- bfloat16 ------------------------------------------------------------------

uint16_t bits_of(__nv_bfloat16 b) {
  uint16_t u;
  std::memcpy(&u, &b, sizeof u);
  return u;
}

__nv_bfloat16 bfloat16_of(uint16_t u) {
  __nv_bfloat16 b;
  std::memcpy(&b, &u, sizeof b);
  return b;
}

// sign, 8 exponent bits (bias 127), 7 fraction bits; exponent 0 is subnormal.
double decode_bfloat16(uint16_t u) {
  const int sign = u >> 15, exponent = (u >> 7) & 255, fraction = u & 127;
  double magnitude;
  if (exponent == 255) {
    magnitude = fraction ? std::numeric_limits<double>::quiet_NaN()
                         : std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(double(fraction), -133);
  } else {
    magnitude = std::ldexp(double(128 + fraction), exponent - 134);
  }
  return sign ? -magnitude : magnitude;
}

// x rounded to the nearest bfloat16, ties to the even pattern, by search over
// the finite non-negative patterns; at or beyond the largest finite value
// plus half an ulp it is infinite.
uint16_t round_to_bfloat16(double x) {
  if (std::isnan(x)) return 0x7fc0;
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double a = std::fabs(x);
  const double largest = decode_bfloat16(0x7f7f);
  if (a >= largest + std::ldexp(1.0, 127 - 8)) return sign | 0x7f80;
  uint16_t lo = 0, hi = 0x7f7f;  // decode(lo) <= a < decode(hi + 1) by bisection
  while (lo < hi) {
    const uint16_t mid = uint16_t((lo + hi + 1) / 2);
    if (decode_bfloat16(mid) <= a) {
      lo = mid;
    } else {
      hi = uint16_t(mid - 1);
    }
  }
  if (lo == 0x7f7f) return sign | lo;
  const double d_lo = a - decode_bfloat16(lo), d_hi = decode_bfloat16(uint16_t(lo + 1)) - a;
  if (d_lo < d_hi) return sign | lo;
  if (d_hi < d_lo) return sign | uint16_t(lo + 1);
  return sign | ((lo & 1) ? uint16_t(lo + 1) : lo);
}

TEST(Bfloat16, EveryPatternConvertsToItsExactFloat) {
  for (uint32_t u = 0; u < 65536; ++u) {
    const double expected = decode_bfloat16(uint16_t(u));
    const float got = __bfloat162float(bfloat16_of(uint16_t(u)));
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(got)) << u;
    } else {
      EXPECT_EQ(double(got), expected) << u;
      EXPECT_EQ(std::signbit(got), std::signbit(expected)) << u;
    }
  }
}

// Every finite bfloat16, every midpoint between neighbours (a tie) and the
// floats just beside each midpoint round as round-to-nearest-even says; NaN
// stays NaN.
TEST(Bfloat16, FloatsRoundToNearestEven) {
  std::vector<float> probes = {0.0f, 1e-45f, std::numeric_limits<float>::max(),
                               std::numeric_limits<float>::infinity()};
  for (uint32_t u = 0; u < 0x7f7f; ++u) {
    const float lo = float(decode_bfloat16(uint16_t(u)));
    const float hi = float(decode_bfloat16(uint16_t(u + 1)));
    const float mid = float((double(lo) + double(hi)) / 2);  // exact in float
    probes.insert(probes.end(), {lo, mid, std::nextafter(mid, 0.0f), std::nextafter(mid, hi)});
  }
  for (float p : probes) {
    for (float x : {p, -p}) {
      ASSERT_EQ(bits_of(__float2bfloat16_rn(x)), round_to_bfloat16(x)) << x;
      ASSERT_EQ(bits_of(__float2bfloat16(x)), round_to_bfloat16(x)) << x;
      ASSERT_EQ(bits_of(__nv_bfloat16(x)), round_to_bfloat16(x)) << x;
    }
  }
  const __nv_bfloat16 nan = __float2bfloat16_rn(std::numeric_limits<float>::quiet_NaN());
  EXPECT_TRUE(__hisnan(nan));
  EXPECT_TRUE(std::isnan(__bfloat162float(nan)));
  // A signalling NaN whose payload lies in the discarded bits stays a NaN.
  uint32_t signalling = 0x7f800001u;
  float snan;
  std::memcpy(&snan, &signalling, sizeof snan);
  EXPECT_TRUE(__hisnan(__float2bfloat16_rn(snan)));
}

TEST(Bfloat16, ArithmeticIsCorrectlyRounded) {
  std::mt19937 random(11);
  std::uniform_int_distribution<int> pattern(0, 0x7f7f);
  int fma_off_by_one = 0;
  for (int i = 0; i < 20000; ++i) {
    // Exponents near each other, so sums round (and do not only keep the larger).
    const uint16_t ua = uint16_t(pattern(random) | (random() % 2 ? 0x8000 : 0));
    const int exponent_step = int(random() % 9) - 4;
    const int magnitude_b =
        (int(ua & 0x7f80) + exponent_step * 0x80 + int(random() & 0x7f)) & 0x7fff;
    const uint16_t ub = uint16_t(magnitude_b | (random() % 2 ? 0x8000 : 0));
    const uint16_t uc = uint16_t(pattern(random));
    const __nv_bfloat16 a = bfloat16_of(ua), b = bfloat16_of(ub), c = bfloat16_of(uc);
    const double x = decode_bfloat16(ua), y = decode_bfloat16(ub), z = decode_bfloat16(uc);
    if (!std::isfinite(x) || !std::isfinite(y)) continue;
    EXPECT_EQ(bits_of(__hadd(a, b)), round_to_bfloat16(x + y)) << x << " + " << y;
    EXPECT_EQ(bits_of(__hsub(a, b)), round_to_bfloat16(x - y)) << x << " - " << y;
    EXPECT_EQ(bits_of(__hmul(a, b)), round_to_bfloat16(x * y)) << x << " * " << y;
    // Rounded twice (float, then bfloat16): within one ulp, and rarely off.
    const int fma_error = std::abs(int(bits_of(__hfma(a, b, c)) & 0x7fff) -
                                   int(round_to_bfloat16(std::fma(x, y, z)) & 0x7fff));
    EXPECT_LE(fma_error, 1) << x << " * " << y << " + " << z;
    fma_off_by_one += fma_error;
    EXPECT_EQ(bits_of(__hneg(a)), uint16_t(ua ^ 0x8000));
    EXPECT_EQ(bits_of(__hmax(a, b)), x >= y ? ua : ub);
    EXPECT_EQ(bits_of(__hmin(a, b)), x <= y ? ua : ub);

    const __nv_bfloat162 p = __halves2bfloat162(a, b), q = make_bfloat162(c, a);
    const __nv_bfloat162 sum = __hadd2(p, q), product = __hmul2(p, q), fused = __hfma2(p, q, p);
    EXPECT_EQ(bits_of(sum.x), bits_of(__hadd(a, c)));
    EXPECT_EQ(bits_of(sum.y), bits_of(__hadd(b, a)));
    EXPECT_EQ(bits_of(product.x), bits_of(__hmul(a, c)));
    EXPECT_EQ(bits_of(fused.y), bits_of(__hfma(b, a, b)));
    const float2 f = __bfloat1622float2(p);
    EXPECT_EQ(double(f.x), x);
    EXPECT_EQ(double(f.y), y);
    EXPECT_EQ(double(__low2float(p)), x);
    EXPECT_EQ(double(__high2float(p)), y);
  }
  EXPECT_LT(fma_off_by_one, 20);
  const __nv_bfloat162 pair = __floats2bfloat162_rn(0.1f, -3.3f);
  const __nv_bfloat162 same = __float2bfloat162_rn(0.1f);
  EXPECT_EQ(bits_of(pair.x), round_to_bfloat16(double(0.1f)));
  EXPECT_EQ(bits_of(pair.y), round_to_bfloat16(double(-3.3f)));
  EXPECT_EQ(bits_of(same.y), round_to_bfloat16(double(0.1f)));
}

// The 16-bit and vector types have CUDA's sizes and alignments, so a 128-bit
// access through uint4 / float4 moves exactly eight 16-bit values.
TEST(VectorTypes, SizesAlignmentsAndFields) {
  static_assert(sizeof(__half) == 2 && sizeof(__nv_bfloat16) == 2);
  static_assert(sizeof(__half2) == 4 && alignof(__half2) == 4);
  static_assert(sizeof(__nv_bfloat162) == 4 && alignof(__nv_bfloat162) == 4);
  static_assert(sizeof(int2) == 8 && alignof(int2) == 8 && sizeof(uint2) == 8 &&
                alignof(uint2) == 8 && sizeof(float2) == 8 && alignof(float2) == 8);
  static_assert(sizeof(int4) == 16 && alignof(int4) == 16 && sizeof(uint4) == 16 &&
                alignof(uint4) == 16 && sizeof(float4) == 16 && alignof(float4) == 16);
  const uint4 u = make_uint4(1, 2, 3, 4);
  const float4 f = make_float4(0.5f, 1.5f, 2.5f, 3.5f);
  const int4 i = make_int4(-1, -2, -3, -4);
  const int2 i2 = make_int2(5, -6);
  const uint2 u2 = make_uint2(7, 8);
  const float2 f2 = make_float2(9.0f, -10.0f);
  EXPECT_EQ(u.x + u.y + u.z + u.w, 10u);
  EXPECT_EQ(f.w, 3.5f);
  EXPECT_EQ(i.z, -3);
  EXPECT_EQ(i2.y, -6);
  EXPECT_EQ(u2.x, 7u);
  EXPECT_EQ(f2.y, -10.0f);
  // Eight bfloat16 through one uint4, in memory order.
  alignas(16) __nv_bfloat16 values[8];
  for (int k = 0; k < 8; ++k) values[k] = __float2bfloat16_rn(float(k) - 3.0f);
  const uint4 bits = *reinterpret_cast<const uint4*>(values);
  alignas(16) __nv_bfloat16 back[8];
  *reinterpret_cast<uint4*>(back) = bits;
  for (int k = 0; k < 8; ++k) EXPECT_EQ(__bfloat162float(back[k]), float(k) - 3.0f);
}

TEST(MathIntrinsics, MatchTheirDefinitions) {
  EXPECT_EQ(rsqrtf(4.0f), 0.5f);
  EXPECT_EQ(rsqrt(0.25), 2.0);
  EXPECT_EQ(__expf(1.0f), expf(1.0f));
  EXPECT_EQ(__logf(2.0f), logf(2.0f));
  EXPECT_EQ(__sinf(0.5f), sinf(0.5f));
  EXPECT_EQ(__cosf(0.5f), cosf(0.5f));
  EXPECT_EQ(__powf(2.0f, 10.0f), 1024.0f);
  EXPECT_EQ(__fdividef(1.0f, 4.0f), 0.25f);
  EXPECT_EQ(__frcp_rn(8.0f), 0.125f);
  EXPECT_EQ(__fsqrt_rn(9.0f), 3.0f);
  EXPECT_EQ(__fmaf_rn(2.0f, 3.0f, 1.0f), 7.0f);
  EXPECT_EQ(__saturatef(std::numeric_limits<float>::quiet_NaN()), 0.0f);
  EXPECT_EQ(__saturatef(-2.0f), 0.0f);
  EXPECT_EQ(__saturatef(0.25f), 0.25f);
  EXPECT_EQ(__saturatef(7.0f), 1.0f);
  EXPECT_EQ(__float_as_int(1.0f), 0x3f800000);
  EXPECT_EQ(__int_as_float(0x40000000), 2.0f);
  EXPECT_EQ(__float_as_uint(-0.0f), 0x80000000u);
  EXPECT_EQ(__uint_as_float(0x3f000000u), 0.5f);
  EXPECT_EQ(__popc(0xf0f0u), 8);
  EXPECT_EQ(__clz(0), 32);
  EXPECT_EQ(__clz(1), 31);
  EXPECT_EQ(__clz(-1), 0);
  EXPECT_EQ(__ffs(0), 0);
  EXPECT_EQ(__ffs(8), 4);
  EXPECT_EQ(max(3, -4), 3);
  EXPECT_EQ(min(3u, 4u), 3u);
  EXPECT_EQ(max(-5LL, 2LL), 2LL);
  EXPECT_EQ(min(1.5f, -2.0f), -2.0f);
  EXPECT_EQ(max(1.5, 2.5), 2.5);
  EXPECT_EQ(max(std::numeric_limits<float>::quiet_NaN(), 1.0f), 1.0f);  // fmaxf
}

}  // namespace
}  // namespace mpiasr
