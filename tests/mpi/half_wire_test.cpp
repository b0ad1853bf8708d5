// The 16-bit message casts of the MPI all-reduce against references computed
// in double from the formats' definitions: the nearest representable value,
// ties to an even significand, overflow to infinity. Values cover every
// binade of each format, subnormals, exact ties, the overflow boundary, zeros
// of both signs, infinities and NaN, at lengths that leave vector tails.
#include "mpi/half_wire.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace mpiasr::mpi {
namespace {

struct Format {
  HalfWire wire;
  const char* name;
  int significant_bits;  // the implicit one included
  int min_exponent;      // of the smallest normal value, 2^min_exponent
  double largest;        // the largest finite value
};

const Format kBf16{HalfWire::kBf16, "bf16", 8, -126, 0x1.fep127};
const Format kFp16{HalfWire::kFp16, "fp16", 11, -14, 65504.0};

// The nearest value of the format to x (ties to an even significand), in
// double: x scaled so that the format's last significant bit is 1, rounded
// to an integer (nearbyint rounds half to even), scaled back; subnormals share
// the smallest normal's scale.
double nearest(const Format& format, double x) {
  if (std::isnan(x) || std::isinf(x) || x == 0) return x;
  int exponent = 0;
  std::frexp(x, &exponent);  // |x| in [2^(exponent - 1), 2^exponent)
  const int scale = std::max(exponent - 1, format.min_exponent) - (format.significant_bits - 1);
  const double rounded = std::ldexp(std::nearbyint(std::ldexp(x, -scale)), scale);
  // Beyond the largest finite value by half an ulp or more: infinite.
  const double limit =
      format.largest + std::ldexp(1.0, int(std::ilogb(format.largest)) - format.significant_bits);
  if (std::fabs(x) >= limit) return std::copysign(INFINITY, x);
  return rounded;
}

std::vector<float> test_values(const Format& format) {
  std::vector<float> values = {0.0f,
                               -0.0f,
                               1.0f,
                               -1.0f,
                               INFINITY,
                               -INFINITY,
                               std::numeric_limits<float>::quiet_NaN(),
                               std::numeric_limits<float>::denorm_min(),
                               std::numeric_limits<float>::max(),
                               -3.0e38f};
  // Exact ties between neighbours of the format, and the values either side.
  for (int e = -20; e <= 20; ++e) {
    const double ulp = std::ldexp(1.0, e - (format.significant_bits - 1));
    for (double m : {1.0, 1.5, 1.25}) {
      const float tie = float(std::ldexp(m, e) + ulp / 2);  // exact in float
      for (float v : {tie, std::nextafter(tie, 0.0f), std::nextafter(tie, 4.0f * tie), -tie}) {
        values.push_back(v);
      }
      values.push_back(float(std::ldexp(m, e) + ulp * 1.5));  // tie above an odd significand
    }
  }
  // Around the largest finite value and the overflow boundary.
  const double ulp_top =
      std::ldexp(1.0, int(std::ilogb(format.largest)) - (format.significant_bits - 1));
  for (double d : {-1.0, -0.5, -0.25, 0.0, 0.25, 0.49, 0.5, 0.51, 1.0, 2.0}) {
    values.push_back(float(format.largest + d * ulp_top));
  }
  // Random values over every binade of the format, subnormals included.
  std::mt19937 generator(7);
  std::uniform_real_distribution<double> mantissa(1.0, 2.0);
  const int top = int(std::ilogb(format.largest));
  for (int e = format.min_exponent - format.significant_bits - 1; e <= top; ++e) {
    for (int k = 0; k < 8; ++k) {
      const double v = std::ldexp(mantissa(generator), e);
      values.push_back(float(k % 2 ? -v : v));
    }
  }
  return values;
}

bool same(float a, float b) {
  return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0;
}

class HalfWireTest : public ::testing::TestWithParam<Format> {};

TEST_P(HalfWireTest, RoundToWireIsTheNearestValueAndTheSenderKeepsIt) {
  const Format& format = GetParam();
  const std::vector<float> input = test_values(format);
  for (size_t n : {input.size(), size_t(1), size_t(17), input.size() - 5}) {
    std::vector<float> values(input.begin(), input.begin() + long(n));
    std::vector<uint16_t> wire(n, 0xdead);
    round_to_wire(format.wire, wire.data(), values.data(), n);
    std::vector<float> received(n, 1.0f);
    copy_from_wire(format.wire, received.data(), wire.data(), n);
    for (size_t i = 0; i < n; ++i) {
      const float expected = float(nearest(format, double(input[i])));
      ASSERT_TRUE(same(values[i], expected)) << format.name << ": " << input[i] << " rounded to "
                                             << values[i] << ", expected " << expected;
      ASSERT_TRUE(same(received[i], values[i]))
          << format.name << ": " << input[i] << " received as " << received[i] << ", sent "
          << values[i];
    }
  }
}

TEST_P(HalfWireTest, AddFromWireAddsTheReceivedValueInFloat) {
  const Format& format = GetParam();
  std::mt19937 generator(11);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const size_t n = 1037;
  std::vector<float> sent(n), sums(n);
  for (size_t i = 0; i < n; ++i) {
    sent[i] = normal(generator);
    sums[i] = normal(generator);
  }
  const std::vector<float> own = sums;
  std::vector<uint16_t> wire(n);
  round_to_wire(format.wire, wire.data(), sent.data(), n);
  add_from_wire(format.wire, sums.data(), wire.data(), n);
  for (size_t i = 0; i < n; ++i) {
    const float expected = own[i] + float(nearest(format, double(sent[i])));
    ASSERT_EQ(sums[i], expected) << format.name << ", element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Formats, HalfWireTest, ::testing::Values(kBf16, kFp16),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace mpiasr::mpi

#include "tests/mpi/mpi_test_main.h"
