// The Winograd convolution, its input gradient and its weight gradient
// against naive seven-loop sums in double, on shapes that cover tiles cut by
// the image's edge (output sizes not multiples of 4 or 2, a single output
// pixel), chunks of 64 tiles and their remainders, chunks that run
// across images, channel blocks of 48, 32 and 16, even and odd sizes, and one
// and two threads; and the subsampling's
// fused backward, which uses the input gradient. Runs at the instruction-set
// level the kernels run (avx512 or avx2; ctest's kernels.avx2.* entry runs
// the avx2 code on an AVX-512 CPU, whose register tile and panels differ),
// and skips at the generic level, where the convolution is im2col + GEMM.
#include "kernels/cpu/conv2d_winograd.h"

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <random>
#include <utility>
#include <vector>

#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/simd.h"
#include "tests/kernels/gradient_check.h"
#include "tests/kernels/naive_conv2d.h"

namespace mpiasr {
namespace {

using testing::ConvCase;

std::vector<double> relu_of(std::vector<double> x) {
  for (double& v : x) v = std::max(v, 0.0);
  return x;
}

class Conv2dWinograd : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2dWinograd, MatchesNaiveConvolutionOnOneAndTwoThreads) {
  const ConvCase c = GetParam();
  if (!conv2d_winograd_available(c.Cin, c.Cout))
    GTEST_SKIP() << "the kernels do not run at the avx2 or avx512 level";
  std::mt19937_64 rng(31);
  const auto inp = testing::random_vector(size_t(c.B) * c.H * c.W * c.Cin, rng);
  const auto w = testing::random_vector(size_t(c.Cout) * c.Cin * 9, rng);
  const auto bias = testing::random_vector(c.Cout, rng);
  const auto inp_f = testing::to_float(inp), w_f = testing::to_float(w),
             bias_f = testing::to_float(bias);
  const std::vector<float> no_bias(c.Cout, 0.0f);
  const size_t out_size = testing::out_size(c);
  for (bool relu : {false, true}) {
    auto expected = testing::naive_conv2d(inp, w, bias, c);
    auto expected_no_bias = testing::naive_conv2d(inp, w, std::vector<double>(c.Cout), c);
    if (relu) {
      expected = relu_of(expected);
      expected_no_bias = relu_of(expected_no_bias);
    }
    for (int threads : {1, 2}) {
      omp_set_num_threads(threads);
      std::vector<float> out(out_size, 99.0f), out_no_bias(out_size, 99.0f);
      conv2d_winograd_forward(out.data(), inp_f.data(), w_f.data(), bias_f.data(), c.B, c.Cin, c.H,
                              c.W, c.Cout, relu);
      conv2d_winograd_forward(out_no_bias.data(), inp_f.data(), w_f.data(), nullptr, c.B, c.Cin,
                              c.H, c.W, c.Cout, relu);
      EXPECT_LT(testing::relative_error(testing::to_double(out), expected),
                testing::kFloatTolerance)
          << threads << " threads, relu " << relu;
      EXPECT_LT(testing::relative_error(testing::to_double(out_no_bias), expected_no_bias),
                testing::kFloatTolerance)
          << threads << " threads, relu " << relu << ", no bias";
    }
  }
  omp_set_num_threads(1);
}

// The part of the input gradient that output lines [first, first + lines) of
// image b contribute to input rows [2 first, 2 first + 2 lines + 1).
std::vector<double> naive_input_grad_strip(const std::vector<double>& g,
                                           const std::vector<double>& w, const ConvCase& c, int b,
                                           int first, int lines) {
  const int Ho = conv2d_out_size(c.H), Wo = conv2d_out_size(c.W);
  std::vector<double> strip(size_t(2 * lines + 1) * c.W * c.Cin, 0.0);
  for (int i = first; i < first + lines; ++i)
    for (int j = 0; j < Wo; ++j)
      for (int kh = 0; kh < 3; ++kh)
        for (int kw = 0; kw < 3; ++kw)
          for (int ci = 0; ci < c.Cin; ++ci)
            for (int co = 0; co < c.Cout; ++co)
              strip[((size_t(2 * (i - first) + kh) * c.W) + 2 * j + kw) * c.Cin + ci] +=
                  g[((size_t(b) * Ho + i) * Wo + j) * c.Cout + co] *
                  w[((size_t(co) * c.Cin + ci) * 3 + kh) * 3 + kw];
  return strip;
}

TEST_P(Conv2dWinograd, InputGradientStripsMatchNaiveSums) {
  const ConvCase c = GetParam();
  if (!conv2d_winograd_available(c.Cin, c.Cout))
    GTEST_SKIP() << "the kernels do not run at the avx2 or avx512 level";
  std::mt19937_64 rng(32);
  const int Ho = conv2d_out_size(c.H);
  const auto w = testing::random_vector(size_t(c.Cout) * c.Cin * 9, rng);
  const auto g = testing::random_vector(size_t(c.B) * Ho * conv2d_out_size(c.W) * c.Cout, rng);
  const auto w_f = testing::to_float(w), g_f = testing::to_float(g);
  const auto transformed = conv2d_winograd_input_grad_weight(w_f.data(), c.Cin, c.Cout);
  std::vector<float> scratch(conv2d_winograd_strip_scratch_size(c.Cin, c.Cout));
  // The whole image as one strip, its first line, its last line, and lines
  // from the middle (a strip that starts inside a tile of the whole image).
  const int b = c.B - 1;
  const std::pair<int, int> line_ranges[] = {{0, Ho}, {0, 1}, {Ho - 1, 1}, {Ho / 3, Ho / 2 + 1}};
  for (const auto& [first, lines] : line_ranges) {
    const auto expected = naive_input_grad_strip(g, w, c, b, first, lines);
    std::vector<float> strip(expected.size(), 99.0f);
    conv2d_winograd_input_grad_strip(strip.data(), g_f.data(), transformed.data(), scratch.data(),
                                     c.B, c.Cin, c.H, c.W, c.Cout, b, first, lines);
    const std::vector<double> got(strip.begin(), strip.end());
    EXPECT_LT(testing::relative_error(got, expected), testing::kFloatTolerance)
        << "lines [" << first << ", " << first + lines << ")";
  }
}

// dW[co, ci, kh, kw] = sum over b, i, j of g[b, i, j, co] inp[b, 2i + kh, 2j + kw, ci]
std::vector<double> naive_weight_grad(const std::vector<double>& g, const std::vector<double>& inp,
                                      const ConvCase& c) {
  const int Ho = conv2d_out_size(c.H), Wo = conv2d_out_size(c.W);
  std::vector<double> dw(size_t(c.Cout) * c.Cin * 9, 0.0);
  for (int b = 0; b < c.B; ++b)
    for (int i = 0; i < Ho; ++i)
      for (int j = 0; j < Wo; ++j)
        for (int co = 0; co < c.Cout; ++co)
          for (int ci = 0; ci < c.Cin; ++ci)
            for (int kh = 0; kh < 3; ++kh)
              for (int kw = 0; kw < 3; ++kw)
                dw[((size_t(co) * c.Cin + ci) * 3 + kh) * 3 + kw] +=
                    g[((size_t(b) * Ho + i) * Wo + j) * c.Cout + co] *
                    inp[((size_t(b) * c.H + 2 * i + kh) * c.W + 2 * j + kw) * c.Cin + ci];
  return dw;
}

TEST_P(Conv2dWinograd, WeightGradientAddsTheNaiveSumOnOneAndTwoThreads) {
  const ConvCase c = GetParam();
  if (!conv2d_winograd_available(c.Cin, c.Cout))
    GTEST_SKIP() << "the kernels do not run at the avx2 or avx512 level";
  std::mt19937_64 rng(34);
  const auto inp = testing::random_vector(size_t(c.B) * c.H * c.W * c.Cin, rng);
  const auto g = testing::random_vector(testing::out_size(c), rng);
  const auto before = testing::random_vector(size_t(c.Cout) * c.Cin * 9, rng);
  auto expected = naive_weight_grad(g, inp, c);
  for (size_t e = 0; e < expected.size(); ++e) expected[e] += before[e];
  const auto inp_f = testing::to_float(inp), g_f = testing::to_float(g);
  for (int threads : {1, 2}) {
    omp_set_num_threads(threads);
    auto dw = testing::to_float(before);
    conv2d_winograd_weight_grad(dw.data(), g_f.data(), inp_f.data(), c.B, c.Cin, c.H, c.W, c.Cout);
    EXPECT_LT(testing::relative_error(testing::to_double(dw), expected), testing::kFloatTolerance)
        << threads << " threads";
  }
  omp_set_num_threads(1);
}

// The subsampling's fused backward, which takes the strips on this CPU, in
// float against double (the GEMM path).
TEST(Conv2dWinograd, SubsamplingFirstConvBackwardInFloatMatchesDouble) {
  const int B = 2, H = 403, W = 41, C = 48;
  if (!conv2d_winograd_available(C, C))
    GTEST_SKIP() << "the kernels do not run at the avx2 or avx512 level";
  const int H1 = conv2d_out_size(H), W1 = conv2d_out_size(W);
  const int H2 = conv2d_out_size(H1), W2 = conv2d_out_size(W1);
  std::mt19937_64 rng(33);
  const auto x = testing::random_vector(size_t(B) * H * W, rng);
  const auto w0 = testing::random_vector(size_t(C) * 9, rng), b0 = testing::random_vector(C, rng);
  const auto w2 = testing::random_vector(size_t(C) * C * 9, rng);
  const auto dout2 = testing::random_vector(size_t(B) * H2 * W2 * C, rng);
  CpuBackend<double> d(2);
  std::vector<double> a1(size_t(B) * H1 * W1 * C), dw0(w0.size(), 0.0), db0(C, 0.0);
  d.conv2d_forward(a1.data(), x.data(), w0.data(), b0.data(), B, 1, H, W, C, true);
  d.subsampling_first_conv_backward(dw0.data(), db0.data(), dout2.data(), a1.data(), x.data(),
                                    w2.data(), B, H, W, C, nullptr);
  const auto a1_f = testing::to_float(a1), x_f = testing::to_float(x), w2_f = testing::to_float(w2),
             dout2_f = testing::to_float(dout2);
  for (int threads : {1, 2}) {
    CpuBackend<float> f(threads);
    std::vector<float> dw0_f(w0.size(), 0.0f), db0_f(C, 0.0f);
    f.subsampling_first_conv_backward(dw0_f.data(), db0_f.data(), dout2_f.data(), a1_f.data(),
                                      x_f.data(), w2_f.data(), B, H, W, C, nullptr);
    EXPECT_LT(testing::relative_error(testing::to_double(dw0_f), dw0), testing::kFloatTolerance)
        << threads << " threads";
    EXPECT_LT(testing::relative_error(testing::to_double(db0_f), db0), testing::kFloatTolerance)
        << threads << " threads";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Shapes, Conv2dWinograd,
    ::testing::Values(ConvCase{2, 16, 9, 7, 16},    // 4 x 3 output: one tile cut at the side
                      ConvCase{1, 32, 3, 3, 32},    // one output pixel, a 32-channel block
                      ConvCase{2, 48, 10, 8, 64},   // even sizes; blocks of 48 and 16
                      ConvCase{2, 32, 41, 39, 96},  // 20 x 19 output: 10 tiles per image
                      ConvCase{3, 16, 37, 5,
                               48},  // 18 x 2: 5 tiles per image, chunks across images
                      ConvCase{1, 64, 12, 10, 32},    // even sizes; 64 input channels
                      ConvCase{2, 144, 23, 21, 144},  // the subsampling's channels
                      ConvCase{2, 16, 67, 71, 16}     // 33 x 35: 81 tiles per image, many chunks
                      ));

// The weight gradient is taken by the transform at the avx512 level only.
TEST(Conv2dWinograd, WeightGradientIsChosenAtTheAvx512LevelOnly) {
  for (const SimdLevel level : {SimdLevel::kGeneric, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (level > simd_best_level()) continue;
    ScopedSimdLevel at(level);
    EXPECT_EQ(conv2d_winograd_weight_grad_chosen(144, 144), level == SimdLevel::kAvx512)
        << simd_level_name(level);
    EXPECT_FALSE(conv2d_winograd_weight_grad_chosen(24, 16)) << simd_level_name(level);
  }
}

TEST(Conv2dWinograd, IsAvailableOnlyForWholeVectorsOfChannels) {
  if (!conv2d_winograd_available(16, 16))
    GTEST_SKIP() << "the kernels do not run at the avx2 or avx512 level";
  EXPECT_FALSE(conv2d_winograd_available(1, 16));
  EXPECT_FALSE(conv2d_winograd_available(24, 16));
  EXPECT_FALSE(conv2d_winograd_available(16, 24));
  EXPECT_TRUE(conv2d_winograd_available(144, 144));
}

// The counts of products the benchmarks use, at the subsampling's conv.2 in
// model_bench (16 images of 199 x 39 pixels, 99 x 19 outputs, 144
// channels): 4 x 4 tiles are 25 x 5 to an image, 81 products each per
// channel pair, 0.60 of the direct 9 per output pixel; 2 x 2 tiles 50 x 10,
// 25 products each, 0.74. Counted on any CPU; the dispatcher's count is the
// direct one where the transform does not run.
TEST(Conv2dWinograd, CountsTheProductsItRuns) {
  const int64_t pairs = 144 * 144, direct = int64_t(16) * 99 * 19 * 9 * pairs;
  EXPECT_EQ(conv2d_winograd_forward_multiply_adds(16, 144, 199, 39, 144),
            int64_t(16) * 25 * 5 * 81 * pairs);
  EXPECT_NEAR(double(conv2d_winograd_forward_multiply_adds(16, 144, 199, 39, 144)) / direct, 0.60,
              0.005);
  EXPECT_EQ(conv2d_winograd_weight_grad_multiply_adds(16, 144, 199, 39, 144),
            int64_t(16) * 50 * 10 * 25 * pairs);
  EXPECT_NEAR(double(conv2d_winograd_weight_grad_multiply_adds(16, 144, 199, 39, 144)) / direct,
              0.74, 0.005);
  // Strips of 32 lines hold whole tiles: as many as the forward's. Strips of
  // 6 lines take 2 tile rows each (16 of them) and the last 3 lines 1.
  EXPECT_EQ(conv2d_winograd_input_grad_multiply_adds(16, 144, 199, 39, 144, 32),
            conv2d_winograd_forward_multiply_adds(16, 144, 199, 39, 144));
  EXPECT_EQ(conv2d_winograd_input_grad_multiply_adds(16, 144, 199, 39, 144, 6),
            int64_t(16) * (16 * 2 + 1) * 5 * 81 * pairs);
  // Cin and Cout apart (32 in, 48 out); 5 x 5 outputs are 2 x 2 tiles of
  // 4 x 4 pixels and 3 x 3 tiles of 2 x 2.
  EXPECT_EQ(conv2d_winograd_forward_multiply_adds(1, 32, 11, 11, 48), int64_t(4) * 81 * 32 * 48);
  EXPECT_EQ(conv2d_winograd_weight_grad_multiply_adds(1, 32, 11, 11, 48),
            int64_t(9) * 25 * 32 * 48);

  const Conv2dMultiplyAdds first = cpu_conv2d_float_multiply_adds(16, 1, 400, 80, 144);
  const int64_t first_direct = int64_t(16) * 199 * 39 * 9 * 144;
  EXPECT_EQ(first.forward, first_direct);
  EXPECT_EQ(first.weight_grad, first_direct);
  const Conv2dMultiplyAdds second = cpu_conv2d_float_multiply_adds(16, 144, 199, 39, 144);
  if (conv2d_winograd_available(144, 144)) {
    EXPECT_EQ(second.forward, conv2d_winograd_forward_multiply_adds(16, 144, 199, 39, 144));
    EXPECT_EQ(second.input_grad, second.forward);
    EXPECT_EQ(second.weight_grad,
              conv2d_winograd_weight_grad_chosen(144, 144)
                  ? conv2d_winograd_weight_grad_multiply_adds(16, 144, 199, 39, 144)
                  : direct);
  } else {
    EXPECT_EQ(second.forward, direct);
    EXPECT_EQ(second.input_grad, direct);
    EXPECT_EQ(second.weight_grad, direct);
  }
}

}  // namespace
}  // namespace mpiasr
