// Conv2d 3x3 stride 2 (channels-last, PyTorch weight layout) against a naive
// seven-loop convolution, and its backward against central differences; the
// shapes cover odd and even sizes, one input channel, and images with several
// chunks so both backward phases and the multi-thread paths run; with relu the
// output is max(conv + bias, 0).
#include "kernels/cpu/conv2d.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "src/base/error.h"
#include "tests/kernels/gradient_check.h"
#include "tests/kernels/naive_conv2d.h"

namespace mpiasr {
namespace {

using testing::kGradTolerance;
using testing::random_vector;
using testing::relative_error;

using testing::ConvCase;
using testing::naive_conv2d;
using testing::out_size;

class Conv2dForward : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2dForward, MatchesNaiveConvolutionOnOneAndTwoThreads) {
  const ConvCase c = GetParam();
  std::mt19937_64 rng(21);
  const auto inp = random_vector(size_t(c.B) * c.H * c.W * c.Cin, rng);
  const auto w = random_vector(size_t(c.Cout) * c.Cin * 9, rng);
  const auto bias = random_vector(c.Cout, rng);
  const auto expected = naive_conv2d(inp, w, bias, c);
  for (int threads : {1, 2}) {
    CpuBackend<double> backend(threads);
    std::vector<double> out(out_size(c), 99.0), relu_out(out_size(c), 99.0);
    backend.conv2d_forward(out.data(), inp.data(), w.data(), bias.data(), c.B, c.Cin, c.H, c.W,
                           c.Cout, false);
    EXPECT_LT(relative_error(out, expected), 1e-14) << threads << " threads";
    // With relu: max(conv + bias, 0) of the same values.
    backend.conv2d_forward(relu_out.data(), inp.data(), w.data(), bias.data(), c.B, c.Cin, c.H, c.W,
                           c.Cout, true);
    for (size_t i = 0; i < out.size(); ++i) ASSERT_EQ(relu_out[i], std::max(out[i], 0.0)) << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Conv2dForward,
                         ::testing::Values(ConvCase{2, 3, 9, 7, 4}, ConvCase{1, 1, 3, 3, 2},
                                           ConvCase{3, 1, 40, 20, 8},    // one input channel
                                           ConvCase{2, 32, 201, 41, 8},  // three chunks per image
                                           ConvCase{1, 5, 10, 8, 3}));   // even sizes

class Conv2dBackward : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2dBackward, MatchesFiniteDifferencesAndAccumulates) {
  const ConvCase c = GetParam();
  std::mt19937_64 rng(22);
  auto inp = random_vector(size_t(c.B) * c.H * c.W * c.Cin, rng);
  auto w = random_vector(size_t(c.Cout) * c.Cin * 9, rng);
  auto bias = random_vector(c.Cout, rng);
  const auto g = random_vector(out_size(c), rng);
  CpuBackend<double> backend(1);
  auto loss = [&] {
    std::vector<double> out(out_size(c));
    backend.conv2d_forward(out.data(), inp.data(), w.data(), bias.data(), c.B, c.Cin, c.H, c.W,
                           c.Cout, false);
    return testing::dot(g, out);
  };
  std::vector<double> dinp(inp.size(), 99.0);
  const auto dw0 = random_vector(w.size(), rng), db0 = random_vector(bias.size(), rng);
  auto dw = dw0, db = db0;
  backend.conv2d_backward(dinp.data(), dw.data(), db.data(), g.data(), inp.data(), w.data(), c.B,
                          c.Cin, c.H, c.W, c.Cout);
  EXPECT_LT(relative_error(dinp, testing::numeric_gradient(inp, loss)), kGradTolerance);
  EXPECT_LT(relative_error(testing::minus(dw, dw0), testing::numeric_gradient(w, loss)),
            kGradTolerance);
  EXPECT_LT(relative_error(testing::minus(db, db0), testing::numeric_gradient(bias, loss)),
            kGradTolerance);
}

INSTANTIATE_TEST_SUITE_P(Shapes, Conv2dBackward,
                         ::testing::Values(ConvCase{2, 3, 9, 8, 4},
                                           ConvCase{3, 1, 11, 9, 5}));  // one input channel

// The adjoint identity <dout, conv(x)> = <conv^T(dout), x> + <dout, bias> on
// shapes large enough to run on two threads, against the naive forward; and the
// input gradient of one thread, bit for bit (col2im order is fixed). With one
// input channel the weight and bias gradients match bit for bit too (they are
// summed image by image in order).
class Conv2dLargeBackward : public ::testing::TestWithParam<ConvCase> {};

TEST_P(Conv2dLargeBackward, IsTheAdjointAndMatchesOneThread) {
  const ConvCase c = GetParam();
  std::mt19937_64 rng(23);
  const auto inp = random_vector(size_t(c.B) * c.H * c.W * c.Cin, rng);
  const auto w = random_vector(size_t(c.Cout) * c.Cin * 9, rng);
  const std::vector<double> no_bias(c.Cout, 0.0);
  const auto g = random_vector(out_size(c), rng);
  CpuBackend<double> backend(2);
  std::vector<double> dinp(inp.size()), dw(w.size(), 0.0), db(c.Cout, 0.0);
  backend.conv2d_backward(dinp.data(), dw.data(), db.data(), g.data(), inp.data(), w.data(), c.B,
                          c.Cin, c.H, c.W, c.Cout);
  const double forward = testing::dot(g, naive_conv2d(inp, w, no_bias, c));
  EXPECT_NEAR(testing::dot(dinp, inp), forward, 1e-10 * std::abs(forward));
  EXPECT_NEAR(testing::dot(dw, w), forward, 1e-10 * std::abs(forward));
  const auto sums = [&](int co) {
    double sum = 0.0;
    for (size_t p = 0; p < g.size() / c.Cout; ++p) sum += g[p * c.Cout + co];
    return sum;
  };
  for (int co = 0; co < c.Cout; ++co) EXPECT_NEAR(db[co], sums(co), 1e-10 * g.size()) << co;
  CpuBackend<double> one(1);
  std::vector<double> dinp1(inp.size()), dw1(w.size(), 0.0), db1(c.Cout, 0.0);
  one.conv2d_backward(dinp1.data(), dw1.data(), db1.data(), g.data(), inp.data(), w.data(), c.B,
                      c.Cin, c.H, c.W, c.Cout);
  EXPECT_EQ(dinp1, dinp);
  if (c.Cin == 1) {
    EXPECT_EQ(dw1, dw);
    EXPECT_EQ(db1, db);
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, Conv2dLargeBackward,
                         ::testing::Values(ConvCase{2, 32, 201, 41, 8},    // three chunks per image
                                           ConvCase{4, 1, 200, 80, 16}));  // one input channel

// The first subsampling convolution's gradients through the second one and the
// ReLU, never forming da1, against the three steps it replaces (input gradient
// of the second convolution, ReLU backward, weight gradient of the first), on a
// shape with two chunks per image; the same bits on one and two threads.
TEST(Conv2d, SubsamplingFirstConvBackwardMatchesTheStepsItFuses) {
  const int B = 2, H = 403, W = 41, C = 64;
  const int H1 = conv2d_out_size(H), W1 = conv2d_out_size(W);
  const int H2 = conv2d_out_size(H1), W2 = conv2d_out_size(W1);
  std::mt19937_64 rng(25);
  const auto x = random_vector(size_t(B) * H * W, rng);
  const auto w0 = random_vector(size_t(C) * 9, rng), b0 = random_vector(C, rng);
  const auto w2 = random_vector(size_t(C) * C * 9, rng);
  const auto dout2 = random_vector(size_t(B) * H2 * W2 * C, rng);
  CpuBackend<double> one(1);
  std::vector<double> a1(size_t(B) * H1 * W1 * C);
  one.conv2d_forward(a1.data(), x.data(), w0.data(), b0.data(), B, 1, H, W, C, true);
  ASSERT_GT(std::count(a1.begin(), a1.end(), 0.0), int64_t(a1.size() / 4)) << "the mask matters";
  // The steps, with da1 formed whole.
  const auto dw0_start = random_vector(w0.size(), rng), db0_start = random_vector(C, rng);
  std::vector<double> da1(a1.size());
  auto dw0_expected = dw0_start, db0_expected = db0_start;
  one.conv2d_backward(da1.data(), nullptr, nullptr, dout2.data(), a1.data(), w2.data(), B, C, H1,
                      W1, C);
  one.relu_backward(da1.data(), da1.data(), a1.data(), da1.size());
  one.conv2d_backward(nullptr, dw0_expected.data(), db0_expected.data(), da1.data(), x.data(),
                      w0.data(), B, 1, H, W, C);
  auto dw0 = dw0_start, db0 = db0_start;
  one.subsampling_first_conv_backward(dw0.data(), db0.data(), dout2.data(), a1.data(), x.data(),
                                      w2.data(), B, H, W, C, nullptr);
  EXPECT_LT(relative_error(testing::minus(dw0, dw0_start), testing::minus(dw0_expected, dw0_start)),
            1e-12);
  EXPECT_LT(relative_error(testing::minus(db0, db0_start), testing::minus(db0_expected, db0_start)),
            1e-12);
  CpuBackend<double> two(2);
  auto dw0_two = dw0_start, db0_two = db0_start;
  two.subsampling_first_conv_backward(dw0_two.data(), db0_two.data(), dout2.data(), a1.data(),
                                      x.data(), w2.data(), B, H, W, C, nullptr);
  EXPECT_EQ(dw0_two, dw0);
  EXPECT_EQ(db0_two, db0);
}

TEST(Conv2d, FloatMatchesDouble) {
  const ConvCase c{2, 32, 41, 21, 32};
  std::mt19937_64 rng(24);
  const auto inp = random_vector(size_t(c.B) * c.H * c.W * c.Cin, rng);
  const auto w = random_vector(size_t(c.Cout) * c.Cin * 9, rng);
  const auto bias = random_vector(c.Cout, rng);
  const auto g = random_vector(out_size(c), rng);
  CpuBackend<double> d(2);
  CpuBackend<float> f(2);
  std::vector<double> out_d(out_size(c)), dinp_d(inp.size()), dw_d(w.size(), 0.0);
  std::vector<float> out_f(out_size(c)), dinp_f(inp.size()), dw_f(w.size(), 0.0f);
  d.conv2d_forward(out_d.data(), inp.data(), w.data(), bias.data(), c.B, c.Cin, c.H, c.W, c.Cout,
                   false);
  d.conv2d_backward(dinp_d.data(), dw_d.data(), nullptr, g.data(), inp.data(), w.data(), c.B, c.Cin,
                    c.H, c.W, c.Cout);
  const auto inp_f = testing::to_float(inp), w_f = testing::to_float(w),
             bias_f = testing::to_float(bias), g_f = testing::to_float(g);
  f.conv2d_forward(out_f.data(), inp_f.data(), w_f.data(), bias_f.data(), c.B, c.Cin, c.H, c.W,
                   c.Cout, false);
  f.conv2d_backward(dinp_f.data(), dw_f.data(), nullptr, g_f.data(), inp_f.data(), w_f.data(), c.B,
                    c.Cin, c.H, c.W, c.Cout);
  EXPECT_LT(relative_error(testing::to_double(out_f), out_d), testing::kFloatTolerance);
  EXPECT_LT(relative_error(testing::to_double(dinp_f), dinp_d), testing::kFloatTolerance);
  EXPECT_LT(relative_error(testing::to_double(dw_f), dw_d), testing::kFloatTolerance);
}

TEST(Conv2d, RejectsInputSmallerThanTheKernel) {
  CpuBackend<double> backend(1);
  std::vector<double> inp(2 * 5), w(9), out(4);
  EXPECT_THROW(
      backend.conv2d_forward(out.data(), inp.data(), w.data(), nullptr, 1, 1, 2, 5, 1, false),
      Error);
}

}  // namespace
}  // namespace mpiasr
