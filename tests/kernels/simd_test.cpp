// The CPU kernels' instruction-set level (kernels/cpu/simd.h): MPIASR_SIMD's
// values and errors, the level this process runs against its environment,
// and each level the processor runs against the generic level on a few
// kernels. AdamW, the sum of squares and dropout give the same bits at every
// level; elsewhere the avx2 and avx512 code contracts multiply-adds (FMA) and
// reduces in vectors of another width, so float results differ in the last
// bits: within 1e-5 of the largest value (the Winograd convolution, which
// only the avx512 level runs, within 1e-5 as well).
#include "kernels/cpu/simd.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/activations.h"
#include "kernels/cpu/adamw.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/conv2d_winograd.h"
#include "kernels/cpu/depthwise_conv1d.h"
#include "kernels/cpu/dropout.h"
#include "kernels/cpu/layernorm.h"
#include "kernels/cpu/log_softmax.h"
#include "src/base/error.h"
#include "tests/base/random_floats.h"

namespace mpiasr {
namespace {

TEST(SimdLevel, ParsesTheLevelNames) {
  EXPECT_EQ(parse_simd_level(nullptr), std::nullopt);
  EXPECT_EQ(parse_simd_level(""), std::nullopt);
  EXPECT_EQ(parse_simd_level("generic"), SimdLevel::kGeneric);
  EXPECT_EQ(parse_simd_level("avx2"), SimdLevel::kAvx2);
  EXPECT_EQ(parse_simd_level("avx512"), SimdLevel::kAvx512);
  for (const SimdLevel level : {SimdLevel::kGeneric, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    EXPECT_EQ(parse_simd_level(simd_level_name(level)), level);
  }
}

TEST(SimdLevel, AnUnknownValueIsAUsageErrorNamingTheValidOnes) {
  for (const char* value : {"sse4", "AVX2", "avx-512", " avx2", "avx512f"}) {
    try {
      parse_simd_level(value);
      ADD_FAILURE() << value << " parsed";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kUsage);
      const std::string message = e.what();
      EXPECT_NE(message.find("MPIASR_SIMD=" + std::string(value) + " is not a level"),
                std::string::npos)
          << message;
      EXPECT_NE(message.find("generic, avx2 or avx512"), std::string::npos) << message;
    }
  }
}

TEST(SimdLevel, FollowsThisProcessEnvironment) {
  const char* value = std::getenv("MPIASR_SIMD");
  const SimdLevel best = simd_best_level();
  const std::optional<SimdLevel> asked = parse_simd_level(value);
  EXPECT_EQ(simd_level(), asked ? std::min(*asked, best) : best)
      << "MPIASR_SIMD=" << (value ? value : "(unset)");
  if (asked && *asked <= best) {
    EXPECT_EQ(simd_level(), *asked);
  }
  EXPECT_EQ(simd_description().rfind(simd_level_name(simd_level()), 0), 0u) << simd_description();
#if MPIASR_SIMD_X86
  // The processor's own support, as GCC's target_clones used to pick.
  EXPECT_EQ(best == SimdLevel::kAvx512, bool(__builtin_cpu_supports("x86-64-v4")));
  EXPECT_EQ(best >= SimdLevel::kAvx2, bool(__builtin_cpu_supports("x86-64-v3")));
#else
  EXPECT_EQ(best, SimdLevel::kGeneric);
#endif
}

// The levels this build runs on this processor, generic first.
std::vector<SimdLevel> supported_levels() {
  std::vector<SimdLevel> levels;
  for (int level = 0; level <= int(simd_best_level()); ++level) levels.push_back(SimdLevel(level));
  return levels;
}

TEST(SimdLevel, ScopedLevelOverridesAndRestores) {
  const SimdLevel before = simd_level();
  for (const SimdLevel level : supported_levels()) {
    ScopedSimdLevel at(level);
    EXPECT_EQ(simd_level(), level);
  }
  EXPECT_EQ(simd_level(), before);
  if (simd_best_level() < SimdLevel::kAvx512) {
    EXPECT_THROW(ScopedSimdLevel(SimdLevel::kAvx512), Error);
  }
}

// The hand-written AVX2 and AVX-512 code follows the level too.
TEST(SimdLevel, CapsTheHandWrittenCode) {
  for (const SimdLevel level : supported_levels()) {
    ScopedSimdLevel at(level);
    const std::string fastest = dropout_tile_generators().front().name;
    EXPECT_EQ(fastest, level == SimdLevel::kAvx512 ? "avx512"
                       : level == SimdLevel::kAvx2 ? "avx2"
                                                   : "portable");
    EXPECT_EQ(conv2d_winograd_available(144, 144), level >= SimdLevel::kAvx2);
  }
}

using testing::random_floats;

// run() at every level above generic against run() at generic: the same
// bits where tolerance is 0, else within tolerance of the largest value.
template <typename Run>
void expect_levels_agree(const char* kernel, Run run, double tolerance) {
  const std::vector<SimdLevel> levels = supported_levels();
  if (levels.size() == 1) GTEST_SKIP() << "only the generic level runs here";
  std::vector<float> generic;
  {
    ScopedSimdLevel at(SimdLevel::kGeneric);
    generic = run();
  }
  double scale = 0;
  for (const float v : generic) scale = std::max(scale, double(std::abs(v)));
  for (const SimdLevel level : levels) {
    if (level == SimdLevel::kGeneric) continue;
    ScopedSimdLevel at(level);
    const std::vector<float> out = run();
    ASSERT_EQ(out.size(), generic.size());
    size_t mismatches = 0;
    double difference = 0;
    for (size_t i = 0; i < out.size(); ++i) {
      mismatches += std::memcmp(&out[i], &generic[i], sizeof(float)) != 0;
      difference = std::max(difference, double(std::abs(out[i] - generic[i])));
    }
    if (tolerance == 0) {
      EXPECT_EQ(mismatches, 0u) << kernel << " at " << simd_level_name(level);
    } else {
      EXPECT_LE(difference, tolerance * scale) << kernel << " at " << simd_level_name(level);
    }
  }
}

// Appends b to a.
std::vector<float> joined(std::vector<float> a, const std::vector<float>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(SimdLevels, AdamWGivesTheSameBits) {
  const size_t n = 100003;
  const std::vector<float> w0 = random_floats(n, 1), g = random_floats(n, 2),
                           m0 = random_floats(n, 3, -0.1f, 0.1f),
                           v0 = random_floats(n, 4, 0.0f, 0.01f);
  const AdamWCoefficients<float> c{3e-4f, 0.9f, 0.98f, 1e-9f, 1e-3f, 0.37f, 0.271f, 0.0394f};
  expect_levels_agree(
      "adamw_step",
      [&] {
        std::vector<float> w = w0, m = m0, v = v0, w_act(n);
        cpu_adamw_step<float>(w.data(), w_act.data(), g.data(), m.data(), v.data(), n, c);
        return joined(joined(joined(w, m), v), w_act);
      },
      0);
}

TEST(SimdLevels, SumOfSquaresGivesTheSameBits) {
  const std::vector<float> g = random_floats(100003, 5);
  const std::vector<double> gd(g.begin(), g.end());
  double generic = 0, generic_double = 0;
  {
    ScopedSimdLevel at(SimdLevel::kGeneric);
    generic = cpu_sum_squares<float>(g.data(), g.size());
    generic_double = cpu_sum_squares<double>(gd.data(), gd.size());
  }
  for (const SimdLevel level : supported_levels()) {
    ScopedSimdLevel at(level);
    EXPECT_EQ(cpu_sum_squares<float>(g.data(), g.size()), generic) << simd_level_name(level);
    EXPECT_EQ(cpu_sum_squares<double>(gd.data(), gd.size()), generic_double)
        << simd_level_name(level);
  }
}

TEST(SimdLevels, DropoutGivesTheSameBits) {
  const size_t n = 100003;
  const std::vector<float> x = random_floats(n, 6);
  expect_levels_agree(
      "dropout",
      [&] {
        std::vector<float> out(n), dinp(n);
        cpu_dropout_forward<float>(out.data(), x.data(), 0.1f, 42, 1000, n);
        cpu_dropout_backward<float>(dinp.data(), x.data(), 0.5f, 0.1f, 42, 1000, n);
        return joined(out, dinp);
      },
      0);
}

TEST(SimdLevels, SwishAgrees) {
  const size_t n = 100003;
  const std::vector<float> x = random_floats(n, 7, -8.0f, 8.0f), dy = random_floats(n, 8);
  expect_levels_agree(
      "swish",
      [&] {
        std::vector<float> out(n), dinp(n);
        cpu_swish_forward<float>(out.data(), x.data(), n);
        cpu_swish_backward<float>(dinp.data(), dy.data(), x.data(), n);
        return joined(out, dinp);
      },
      1e-5);
}

TEST(SimdLevels, LayerNormAgrees) {
  const int N = 300, C = 144;
  const std::vector<float> x = random_floats(size_t(N) * C, 9), w = random_floats(C, 10),
                           b = random_floats(C, 11), dy = random_floats(size_t(N) * C, 12);
  expect_levels_agree(
      "layernorm",
      [&] {
        std::vector<float> out(x.size()), mean(N), rstd(N), dx(x.size()), dw(C), db(C);
        cpu_layernorm_forward<float>(out.data(), mean.data(), rstd.data(), x.data(), w.data(),
                                     b.data(), N, C, 1e-5f);
        cpu_layernorm_backward<float>(dx.data(), dw.data(), db.data(), dy.data(), x.data(),
                                      w.data(), mean.data(), rstd.data(), N, C, false);
        return joined(joined(joined(out, dx), dw), db);
      },
      1e-5);
}

TEST(SimdLevels, DepthwiseConvolutionAgrees) {
  // 150 channels: whole vectors and a tail.
  const int B = 2, T = 50, C = 150, K = 15;
  const std::vector<int32_t> lengths = {50, 37};
  const std::vector<float> x = random_floats(size_t(B) * T * C, 13), w = random_floats(C * K, 14),
                           bias = random_floats(C, 15), dy = random_floats(x.size(), 16);
  expect_levels_agree(
      "depthwise_conv1d",
      [&] {
        std::vector<float> out(x.size()), dx(x.size()), dw(w.size()), db(C);
        cpu_depthwise_conv1d_forward<float>(out.data(), x.data(), w.data(), bias.data(),
                                            lengths.data(), B, T, C, K);
        cpu_depthwise_conv1d_backward<float>(dx.data(), dw.data(), db.data(), dy.data(), x.data(),
                                             w.data(), lengths.data(), B, T, C, K);
        return joined(joined(joined(out, dx), dw), db);
      },
      1e-5);
}

TEST(SimdLevels, ConvolutionAgrees) {
  // Cin = 1: the direct first layer; Cin = 16: im2col + GEMM, or Winograd at avx512.
  const int B = 2, H = 23, W = 19;
  for (const int Cin : {1, 16}) {
    const int Cout = 32, Ho = conv2d_out_size(H), Wo = conv2d_out_size(W);
    const std::vector<float> x = random_floats(size_t(B) * H * W * Cin, 17),
                             w = random_floats(size_t(Cout) * Cin * 9, 18),
                             bias = random_floats(Cout, 19),
                             dy = random_floats(size_t(B) * Ho * Wo * Cout, 20);
    expect_levels_agree(
        Cin == 1 ? "conv2d, Cin 1" : "conv2d, Cin 16",
        [&] {
          std::vector<float> out(dy.size()), dx(x.size()), dw(w.size()), db(Cout);
          cpu_conv2d_forward<float>(out.data(), x.data(), w.data(), bias.data(), B, Cin, H, W, Cout,
                                    true);
          cpu_conv2d_backward<float>(dx.data(), dw.data(), db.data(), dy.data(), x.data(), w.data(),
                                     B, Cin, H, W, Cout);
          return joined(joined(joined(out, dx), dw), db);
        },
        1e-5);
  }
}

TEST(SimdLevels, LogSoftmaxAndAttentionAgree) {
  const int N = 50, V = 1000;
  const std::vector<float> logits = random_floats(size_t(N) * V, 21, -5.0f, 5.0f);
  expect_levels_agree(
      "log_softmax",
      [&] {
        std::vector<float> out(logits.size());
        cpu_log_softmax_forward<float>(out.data(), logits.data(), N, V);
        return out;
      },
      1e-5);
  const int B = 2, T = 21, H = 2, Dh = 16;
  const std::vector<int32_t> lengths = {21, 13};
  const std::vector<float> qkv = random_floats(size_t(B) * T * 3 * H * Dh, 22);
  expect_levels_agree(
      "attention",
      [&] {
        std::vector<float> out(size_t(B) * T * H * Dh), lse(size_t(B) * H * T);
        cpu_attention_forward<float>(out.data(), lse.data(), qkv.data(), lengths.data(), B, T, H,
                                     Dh, 0.25f);
        return joined(out, lse);
      },
      1e-5);
}

}  // namespace
}  // namespace mpiasr
