// Fused attention (kernels/cpu/attention.h): the forward against its
// definition written out here (RoPE from its angles pos * 10000^(-2i/Dh) on
// the pairs (i, i + Dh/2), softmax over the valid keys, weighted sum), padded
// keys inert with zero gradient, the backward against central differences,
// float against double, and the argument checks.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "src/base/error.h"
#include "tests/kernels/gradient_check.h"

namespace mpiasr {
namespace {

using testing::kGradTolerance;
using testing::random_vector;
using testing::relative_error;

// q, k, v [B, H, T, Dh] from qkv [B, T, 3, H, Dh], rotating q and k by definition.
void reference_split_rope(std::vector<double>& q, std::vector<double>& k, std::vector<double>& v,
                          const std::vector<double>& qkv, int B, int T, int H, int Dh) {
  const int half = Dh / 2;
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < T; ++t)
      for (int h = 0; h < H; ++h) {
        const size_t dst = ((size_t(b) * H + h) * T + t) * Dh;
        for (int which = 0; which < 3; ++which) {
          const double* x = &qkv[(((size_t(b) * T + t) * 3 + which) * H + h) * Dh];
          std::vector<double>& out = which == 0 ? q : which == 1 ? k : v;
          for (int i = 0; i < half; ++i) {
            const double theta = std::pow(10000.0, -2.0 * i / Dh), angle = t * theta;
            if (which == 2) {
              out[dst + i] = x[i];
              out[dst + i + half] = x[i + half];
            } else {
              out[dst + i] = x[i] * std::cos(angle) - x[i + half] * std::sin(angle);
              out[dst + i + half] = x[i + half] * std::cos(angle) + x[i] * std::sin(angle);
            }
          }
        }
      }
}

// out [B, T, H, Dh] and lse [B, H, T] of the attention from its
// definition: q, k, v by reference_split_rope, then per (b, h, t) the softmax
// over the keys s < L of scale q_t . k_s and the weighted sum of v_s.
void reference_attention(std::vector<double>& out, std::vector<double>& lse,
                         const std::vector<double>& qkv, const std::vector<int32_t>& lengths, int B,
                         int T, int H, int Dh, double scale) {
  const size_t n = size_t(B) * H * T * Dh;
  std::vector<double> q(n), k(n), v(n);
  reference_split_rope(q, k, v, qkv, B, T, H, Dh);
  out.assign(n, 0.0);
  lse.assign(size_t(B) * H * T, -INFINITY);
  for (int b = 0; b < B; ++b) {
    const int L = lengths[size_t(b)];
    for (int h = 0; h < H; ++h) {
      const size_t head = (size_t(b) * H + h) * T * Dh;
      for (int t = 0; t < T; ++t) {
        if (L == 0) continue;
        std::vector<double> score(static_cast<size_t>(L));
        double max = -INFINITY;
        for (int s = 0; s < L; ++s) {
          double dot = 0;
          for (int d = 0; d < Dh; ++d)
            dot += q[head + size_t(t) * Dh + d] * k[head + size_t(s) * Dh + d];
          score[size_t(s)] = scale * dot;
          max = std::max(max, score[size_t(s)]);
        }
        double sum = 0;
        for (double x : score) sum += std::exp(x - max);
        lse[(size_t(b) * H + h) * T + t] = max + std::log(sum);
        for (int d = 0; d < Dh; ++d) {
          double acc = 0;
          for (int s = 0; s < L; ++s) {
            acc += std::exp(score[size_t(s)] - max) / sum * v[head + size_t(s) * Dh + d];
          }
          out[((size_t(b) * T + t) * H + h) * Dh + d] = acc;
        }
      }
    }
  }
}

// Utterances of full, partial, single-frame and zero length; one and two threads.
TEST(Attention, ForwardMatchesTheDefinition) {
  const int B = 4, T = 50, H = 3, Dh = 36;  // above the parallel threshold
  const std::vector<int32_t> lengths = {50, 23, 1, 0};
  const double scale = double(float(1.0 / std::sqrt(double(Dh))));  // the backend takes a float
  std::mt19937_64 rng(70);
  const auto qkv = random_vector(size_t(B) * T * 3 * H * Dh, rng, -2.0, 2.0);
  std::vector<double> expected_out, expected_lse;
  reference_attention(expected_out, expected_lse, qkv, lengths, B, T, H, Dh, scale);
  for (int threads : {1, 2}) {
    CpuBackend<double> backend(threads);
    std::vector<double> out(expected_out.size(), 99.0), lse(expected_lse.size(), 99.0);
    backend.attention_forward(out.data(), lse.data(), qkv.data(), lengths.data(), B, T, H, Dh,
                              float(scale));
    EXPECT_LT(relative_error(out, expected_out), 1e-13);
    for (size_t i = 0; i < lse.size(); ++i) {
      if (std::isinf(expected_lse[i])) {
        EXPECT_EQ(lse[i], expected_lse[i]) << i;  // no valid key: -inf, and zero output
      } else {
        EXPECT_NEAR(lse[i], expected_lse[i], 1e-13 * std::abs(expected_lse[i])) << i;
      }
    }
  }
}

// The keys and values of padded frames change nothing, and get zero gradient.
TEST(Attention, PaddedKeysChangeNothingAndGetZeroGradient) {
  const int B = 2, T = 9, H = 2, Dh = 6;
  const std::vector<int32_t> lengths = {9, 4};
  std::mt19937_64 rng(71);
  auto qkv = random_vector(size_t(B) * T * 3 * H * Dh, rng);
  const auto g = random_vector(size_t(B) * T * H * Dh, rng);
  CpuBackend<double> backend(1);
  std::vector<double> out(g.size()), lse(size_t(B) * H * T), dqkv(qkv.size(), 99.0);
  backend.attention_forward(out.data(), lse.data(), qkv.data(), lengths.data(), B, T, H, Dh, 0.5f);
  backend.attention_backward(dqkv.data(), g.data(), out.data(), lse.data(), qkv.data(),
                             lengths.data(), B, T, H, Dh, 0.5f);
  auto at = [&](int b, int t, int part, int h, int d) {
    return (((size_t(b) * T + t) * 3 + part) * H + h) * Dh + d;
  };
  const std::vector<double> before = out;
  for (int t = lengths[1]; t < T; ++t) {
    for (int part : {1, 2}) {
      for (int h = 0; h < H; ++h) {
        for (int d = 0; d < Dh; ++d) {
          EXPECT_EQ(dqkv[at(1, t, part, h, d)], 0.0);
          qkv[at(1, t, part, h, d)] = 1e3;
        }
      }
    }
  }
  backend.attention_forward(out.data(), lse.data(), qkv.data(), lengths.data(), B, T, H, Dh, 0.5f);
  EXPECT_EQ(out, before);
}

TEST(Attention, BackwardMatchesFiniteDifferences) {
  const int B = 3, T = 7, H = 2, Dh = 4;
  const std::vector<int32_t> lengths = {7, 4, 0};
  std::mt19937_64 rng(72);
  auto qkv = random_vector(size_t(B) * T * 3 * H * Dh, rng);
  const auto g = random_vector(size_t(B) * T * H * Dh, rng);
  CpuBackend<double> backend(1);
  std::vector<double> out(g.size()), lse(size_t(B) * H * T), dqkv(qkv.size(), 99.0);
  auto loss = [&] {
    backend.attention_forward(out.data(), lse.data(), qkv.data(), lengths.data(), B, T, H, Dh,
                              0.7f);
    return testing::dot(g, out);
  };
  loss();
  backend.attention_backward(dqkv.data(), g.data(), out.data(), lse.data(), qkv.data(),
                             lengths.data(), B, T, H, Dh, 0.7f);
  EXPECT_LT(relative_error(dqkv, testing::numeric_gradient(qkv, loss)), kGradTolerance);
}

// Frame counts with and without padding to the 16 queries of a vector.
TEST(Attention, FloatMatchesDouble) {
  struct Case {
    int T;
    std::vector<int32_t> lengths;
  };
  for (const Case& c : {Case{50, {50, 31}}, Case{32, {32, 17}}}) {
    const int B = 2, H = 4, T = c.T, Dh = 36;
    const std::vector<int32_t>& lengths = c.lengths;
    std::mt19937_64 rng(73);
    const auto qkv = random_vector(size_t(B) * T * 3 * H * Dh, rng);
    const auto g = random_vector(size_t(B) * T * H * Dh, rng);
    const float scale = 1.0f / 6.0f;
    CpuBackend<double> d(2);
    CpuBackend<float> f(2);
    std::vector<double> out_d(g.size()), lse_d(size_t(B) * H * T), dqkv_d(qkv.size());
    std::vector<float> out_f(g.size()), lse_f(lse_d.size()), dqkv_f(qkv.size());
    const auto qkv_f = testing::to_float(qkv), g_f = testing::to_float(g);
    d.attention_forward(out_d.data(), lse_d.data(), qkv.data(), lengths.data(), B, T, H, Dh, scale);
    f.attention_forward(out_f.data(), lse_f.data(), qkv_f.data(), lengths.data(), B, T, H, Dh,
                        scale);
    EXPECT_LT(relative_error(testing::to_double(out_f), out_d), testing::kFloatTolerance) << T;
    EXPECT_LT(relative_error(testing::to_double(lse_f), lse_d), testing::kFloatTolerance) << T;
    d.attention_backward(dqkv_d.data(), g.data(), out_d.data(), lse_d.data(), qkv.data(),
                         lengths.data(), B, T, H, Dh, scale);
    f.attention_backward(dqkv_f.data(), g_f.data(), out_f.data(), lse_f.data(), qkv_f.data(),
                         lengths.data(), B, T, H, Dh, scale);
    EXPECT_LT(relative_error(testing::to_double(dqkv_f), dqkv_d), testing::kFloatTolerance) << T;
  }
}

TEST(Attention, RejectsOddHeadSizeAndLengthsBeyondFrames) {
  CpuBackend<double> backend(1);
  std::vector<double> qkv(size_t(2) * 3 * 1 * 3), out(6), lse(2), dqkv(qkv.size());
  const int32_t fine = 2, too_long = 3;
  EXPECT_THROW(
      backend.attention_forward(out.data(), lse.data(), qkv.data(), &fine, 1, 2, 1, 3, 1.0f),
      Error);
  std::vector<double> qkv4(size_t(2) * 3 * 4), out4(8), dqkv4(qkv4.size());
  EXPECT_THROW(
      backend.attention_forward(out4.data(), lse.data(), qkv4.data(), &too_long, 1, 2, 1, 4, 1.0f),
      Error);
  EXPECT_THROW(backend.attention_backward(dqkv4.data(), out4.data(), out4.data(), lse.data(),
                                          qkv4.data(), &too_long, 1, 2, 1, 4, 1.0f),
               Error);
}

}  // namespace
}  // namespace mpiasr
