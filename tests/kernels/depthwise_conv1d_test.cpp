// GLU then depthwise Conv1d ("same" padding, masked at padding), the conv
// module's middle op, against a naive loop that computes the GLU with
// std::exp and zeroes frames past the length; padded inputs change nothing
// and padded outputs are zero; the backward pass against central differences
// (so input gradients at padded frames are zero too); float against double.
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

// inp [B, T, 2C]: g = inp[..., c] sigmoid(inp[..., C + c]), then the convolution.
std::vector<double> naive_glu_depthwise(const std::vector<double>& inp,
                                        const std::vector<double>& w,
                                        const std::vector<double>& bias,
                                        const std::vector<int32_t>& lengths, int B, int T, int C,
                                        int K) {
  const auto g = [&](int b, int s, int c) {
    const double* p = inp.data() + (size_t(b) * T + s) * 2 * C;
    return p[c] / (1.0 + std::exp(-p[C + c]));
  };
  std::vector<double> out(size_t(B) * T * C, 0.0);
  for (int b = 0; b < B; ++b)
    for (int t = 0; t < lengths[b]; ++t)
      for (int c = 0; c < C; ++c) {
        double sum = bias[c];
        for (int k = 0; k < K; ++k) {
          const int s = t + k - (K - 1) / 2;
          if (s >= 0 && s < lengths[b]) sum += w[c * K + k] * g(b, s, c);
        }
        out[(size_t(b) * T + t) * C + c] = sum;
      }
  return out;
}

TEST(GluDepthwiseConv1d, ForwardMatchesNaiveLoopAndIgnoresPadding) {
  const int B = 4, T = 60, C = 24, K = 31;  // above the parallel threshold
  const std::vector<int32_t> lengths = {60, 45, 10, 0};
  std::mt19937_64 rng(71);
  const auto inp = random_vector(size_t(B) * T * 2 * C, rng), w = random_vector(size_t(C) * K, rng),
             bias = random_vector(C, rng);
  const auto expected = naive_glu_depthwise(inp, w, bias, lengths, B, T, C, K);
  auto padded_changed = inp;
  for (int b = 0; b < B; ++b)
    for (size_t i = size_t(b * T + lengths[b]) * 2 * C; i < size_t(b + 1) * T * 2 * C; ++i)
      padded_changed[i] = 1e6;
  for (int threads : {1, 2}) {
    CpuBackend<double> backend(threads);
    std::vector<double> out(expected.size(), 99.0), out2(expected.size(), 99.0);
    backend.glu_depthwise_conv1d_forward(out.data(), inp.data(), w.data(), bias.data(),
                                         lengths.data(), B, T, C, K);
    EXPECT_LT(relative_error(out, expected), 1e-14);
    backend.glu_depthwise_conv1d_forward(out2.data(), padded_changed.data(), w.data(), bias.data(),
                                         lengths.data(), B, T, C, K);
    EXPECT_EQ(out2, out);
    for (int b = 0; b < B; ++b)
      for (size_t i = size_t(b * T + lengths[b]) * C; i < size_t(b + 1) * T * C; ++i)
        ASSERT_EQ(out[i], 0.0);
  }
}

TEST(GluDepthwiseConv1d, BackwardMatchesFiniteDifferencesAndAccumulates) {
  const int B = 2, T = 9, C = 3, K = 5;
  const std::vector<int32_t> lengths = {9, 4};
  std::mt19937_64 rng(72);
  auto inp = random_vector(size_t(B) * T * 2 * C, rng), w = random_vector(size_t(C) * K, rng),
       bias = random_vector(C, rng);
  const auto g = random_vector(size_t(B) * T * C, rng);
  CpuBackend<double> backend(1);
  std::vector<double> out(g.size());
  auto loss = [&] {
    backend.glu_depthwise_conv1d_forward(out.data(), inp.data(), w.data(), bias.data(),
                                         lengths.data(), B, T, C, K);
    return testing::dot(g, out);
  };
  std::vector<double> dinp(inp.size(), 99.0);
  const auto dw0 = random_vector(w.size(), rng), db0 = random_vector(C, rng);
  auto dw = dw0, db = db0;
  backend.glu_depthwise_conv1d_backward(dinp.data(), dw.data(), db.data(), g.data(), inp.data(),
                                        w.data(), lengths.data(), B, T, C, K);
  const auto numeric = testing::numeric_gradient(inp, loss);
  EXPECT_LT(relative_error(dinp, numeric), kGradTolerance);
  for (int t = lengths[1]; t < T; ++t)
    for (int c = 0; c < 2 * C; ++c) EXPECT_EQ(dinp[(size_t(T) + t) * 2 * C + c], 0.0);
  EXPECT_LT(relative_error(testing::minus(dw, dw0), testing::numeric_gradient(w, loss)),
            kGradTolerance);
  EXPECT_LT(relative_error(testing::minus(db, db0), testing::numeric_gradient(bias, loss)),
            kGradTolerance);
}

TEST(GluDepthwiseConv1d, BackwardIsTheSameOnOneAndTwoThreads) {
  const int B = 4, T = 50, C = 36, K = 31;
  const std::vector<int32_t> lengths = {50, 33, 7, 49};
  std::mt19937_64 rng(73);
  const auto inp = random_vector(size_t(B) * T * 2 * C, rng), w = random_vector(size_t(C) * K, rng),
             g = random_vector(size_t(B) * T * C, rng);
  std::vector<std::vector<double>> results;
  for (int threads : {1, 2}) {
    CpuBackend<double> backend(threads);
    std::vector<double> dinp(inp.size()), dw(w.size(), 0.0), db(C, 0.0);
    backend.glu_depthwise_conv1d_backward(dinp.data(), dw.data(), db.data(), g.data(), inp.data(),
                                          w.data(), lengths.data(), B, T, C, K);
    results.insert(results.end(), {dinp, dw, db});
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(results[i], results[i + 3]) << i;
}

TEST(GluDepthwiseConv1d, FloatMatchesDouble) {
  const int B = 3, T = 70, C = 40, K = 31;  // two vectors of 16 floats and a tail
  const std::vector<int32_t> lengths = {70, 52, 20};
  std::mt19937_64 rng(74);
  const auto inp = random_vector(size_t(B) * T * 2 * C, rng), w = random_vector(size_t(C) * K, rng),
             bias = random_vector(C, rng), g = random_vector(size_t(B) * T * C, rng);
  CpuBackend<double> d(2);
  CpuBackend<float> f(2);
  std::vector<double> out_d(g.size()), dinp_d(inp.size()), dw_d(w.size(), 0.0);
  std::vector<float> out_f(g.size()), dinp_f(inp.size()), dw_f(w.size(), 0.0f);
  const auto inp_f = testing::to_float(inp), w_f = testing::to_float(w),
             bias_f = testing::to_float(bias), g_f = testing::to_float(g);
  d.glu_depthwise_conv1d_forward(out_d.data(), inp.data(), w.data(), bias.data(), lengths.data(), B,
                                 T, C, K);
  f.glu_depthwise_conv1d_forward(out_f.data(), inp_f.data(), w_f.data(), bias_f.data(),
                                 lengths.data(), B, T, C, K);
  d.glu_depthwise_conv1d_backward(dinp_d.data(), dw_d.data(), nullptr, g.data(), inp.data(),
                                  w.data(), lengths.data(), B, T, C, K);
  f.glu_depthwise_conv1d_backward(dinp_f.data(), dw_f.data(), nullptr, g_f.data(), inp_f.data(),
                                  w_f.data(), lengths.data(), B, T, C, K);
  EXPECT_LT(relative_error(testing::to_double(out_f), out_d), testing::kFloatTolerance);
  EXPECT_LT(relative_error(testing::to_double(dinp_f), dinp_d), testing::kFloatTolerance);
  EXPECT_LT(relative_error(testing::to_double(dw_f), dw_d), testing::kFloatTolerance);
}

TEST(GluDepthwiseConv1d, RejectsEvenKernelAndBadLength) {
  CpuBackend<double> backend(1);
  std::vector<double> x(16), w(4), out(8);
  const int32_t ok[] = {4}, too_long[] = {5};
  EXPECT_THROW(
      backend.glu_depthwise_conv1d_forward(out.data(), x.data(), w.data(), nullptr, ok, 1, 4, 2, 2),
      Error);
  EXPECT_THROW(backend.glu_depthwise_conv1d_forward(out.data(), x.data(), w.data(), nullptr,
                                                    too_long, 1, 4, 2, 1),
               Error);
}

}  // namespace
}  // namespace mpiasr
