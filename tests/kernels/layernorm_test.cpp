// LayerNorm against the textbook formula (two-pass mean and variance written
// here), its backward against central differences (dinp accumulated or
// written, dweight and dbias accumulated), and float against double; the fused
// forms: the residual sum before it against the sum written out, the Swish
// after it against central differences.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/activations.h"
#include "kernels/cpu/cpu_backend.h"
#include "kernels/philox.h"
#include "tests/kernels/gradient_check.h"

namespace mpiasr {
namespace {

using testing::kGradTolerance;
using testing::random_vector;
using testing::relative_error;

constexpr float kEps = 1e-5f;

TEST(LayerNorm, ForwardMatchesFormulaAndSavesStatistics) {
  const int N = 300, C = 144;  // above the parallel threshold
  std::mt19937_64 rng(31);
  const auto x = random_vector(N * C, rng, -2.0, 3.0), w = random_vector(C, rng),
             b = random_vector(C, rng);
  std::vector<double> expected(N * C), expected_mean(N), expected_rstd(N);
  for (int n = 0; n < N; ++n) {
    double mean = 0, var = 0;
    for (int c = 0; c < C; ++c) mean += x[n * C + c] / C;
    for (int c = 0; c < C; ++c) var += (x[n * C + c] - mean) * (x[n * C + c] - mean) / C;
    expected_mean[n] = mean;
    expected_rstd[n] = 1.0 / std::sqrt(var + double(kEps));
    for (int c = 0; c < C; ++c)
      expected[n * C + c] = (x[n * C + c] - mean) * expected_rstd[n] * w[c] + b[c];
  }
  for (int threads : {1, 2}) {
    CpuBackend<double> backend(threads);
    std::vector<double> out(N * C), mean(N), rstd(N);
    backend.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N,
                              C, kEps);
    EXPECT_LT(relative_error(out, expected), 1e-13);
    EXPECT_LT(relative_error(mean, expected_mean), 1e-13);
    EXPECT_LT(relative_error(rstd, expected_rstd), 1e-13);
  }
}

TEST(LayerNorm, BackwardMatchesFiniteDifferencesAndAccumulates) {
  const int N = 5, C = 7;
  std::mt19937_64 rng(32);
  auto x = random_vector(N * C, rng), w = random_vector(C, rng), b = random_vector(C, rng);
  const auto g = random_vector(N * C, rng);
  CpuBackend<double> backend(1);
  std::vector<double> out(N * C), mean(N), rstd(N);
  auto loss = [&] {
    backend.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N,
                              C, kEps);
    return testing::dot(g, out);
  };
  loss();
  const auto dx0 = random_vector(N * C, rng), dw0 = random_vector(C, rng),
             db0 = random_vector(C, rng);
  auto dx = dx0, dw = dw0, db = db0;
  backend.layernorm_backward(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(),
                             mean.data(), rstd.data(), N, C, true);
  EXPECT_LT(relative_error(testing::minus(dx, dx0), testing::numeric_gradient(x, loss)),
            kGradTolerance);
  EXPECT_LT(relative_error(testing::minus(dw, dw0), testing::numeric_gradient(w, loss)),
            kGradTolerance);
  EXPECT_LT(relative_error(testing::minus(db, db0), testing::numeric_gradient(b, loss)),
            kGradTolerance);
  // Written instead of accumulated: what was in dinp does not matter.
  std::vector<double> written(N * C, std::nan("")), dw1(C, 0.0);
  backend.layernorm_backward(written.data(), dw1.data(), nullptr, g.data(), x.data(), w.data(),
                             mean.data(), rstd.data(), N, C, false);
  EXPECT_LT(relative_error(written, testing::minus(dx, dx0)), 1e-14);
}

TEST(LayerNorm, ResidualFormIsTheSumThenLayerNorm) {
  const int N = 300, C = 144;
  const float scale = 0.5f, p = 0.2f;
  std::mt19937_64 rng(35);
  const auto base = random_vector(N * C, rng), branch = random_vector(N * C, rng),
             w = random_vector(C, rng), b = random_vector(C, rng);
  std::vector<double> sum(N * C);
  for (int i = 0; i < N * C; ++i)
    sum[i] = base[i] + scale * (dropout_keep(7, 16 + i, p) ? branch[i] / (1.0 - double(p)) : 0.0);
  CpuBackend<double> backend(2);
  std::vector<double> expected(N * C), expected_mean(N), expected_rstd(N);
  backend.layernorm_forward(expected.data(), expected_mean.data(), expected_rstd.data(), sum.data(),
                            w.data(), b.data(), N, C, kEps);
  std::vector<double> x(N * C), out(N * C), mean(N), rstd(N);
  backend.residual_layernorm_forward(x.data(), out.data(), mean.data(), rstd.data(), base.data(),
                                     branch.data(), scale, p, 7, 16, w.data(), b.data(), N, C,
                                     kEps);
  EXPECT_LT(relative_error(x, sum), 1e-15);
  EXPECT_LT(relative_error(out, expected), 1e-13);
  EXPECT_LT(relative_error(mean, expected_mean), 1e-13);
  EXPECT_LT(relative_error(rstd, expected_rstd), 1e-13);
}

TEST(LayerNorm, SwishFormMatchesFiniteDifferences) {
  const int N = 5, C = 7;
  std::mt19937_64 rng(36);
  auto x = random_vector(N * C, rng), w = random_vector(C, rng), b = random_vector(C, rng);
  const auto g = random_vector(N * C, rng);
  CpuBackend<double> backend(1);
  std::vector<double> normed(N * C), out(N * C), mean(N), rstd(N);
  auto loss = [&] {
    backend.layernorm_swish_forward(normed.data(), out.data(), mean.data(), rstd.data(), x.data(),
                                    w.data(), b.data(), N, C, kEps);
    return testing::dot(g, out);
  };
  loss();
  std::vector<double> plain(N * C);
  backend.layernorm_forward(plain.data(), nullptr, nullptr, x.data(), w.data(), b.data(), N, C,
                            kEps);
  EXPECT_EQ(normed, plain);
  for (int i = 0; i < N * C; ++i)
    EXPECT_NEAR(out[i], plain[i] / (1.0 + std::exp(-plain[i])), 1e-15);
  const auto dw0 = random_vector(C, rng), db0 = random_vector(C, rng);
  std::vector<double> dx(N * C, std::nan(""));
  auto dw = dw0, db = db0;
  backend.layernorm_swish_backward(dx.data(), dw.data(), db.data(), g.data(), x.data(),
                                   normed.data(), w.data(), mean.data(), rstd.data(), N, C);
  EXPECT_LT(relative_error(dx, testing::numeric_gradient(x, loss)), kGradTolerance);
  EXPECT_LT(relative_error(testing::minus(dw, dw0), testing::numeric_gradient(w, loss)),
            kGradTolerance);
  EXPECT_LT(relative_error(testing::minus(db, db0), testing::numeric_gradient(b, loss)),
            kGradTolerance);
}

TEST(LayerNorm, BackwardIsTheSameOnOneAndTwoThreads) {
  const int N = 400, C = 144;
  std::mt19937_64 rng(33);
  const auto x = random_vector(N * C, rng), w = random_vector(C, rng), b = random_vector(C, rng),
             g = random_vector(N * C, rng);
  std::vector<std::vector<double>> results;
  for (int threads : {1, 2}) {
    CpuBackend<double> backend(threads);
    std::vector<double> out(N * C), mean(N), rstd(N), dx(N * C, 0.0), dw(C, 0.0), db(C, 0.0);
    backend.layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N,
                              C, kEps);
    backend.layernorm_backward(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(),
                               mean.data(), rstd.data(), N, C, true);
    results.push_back(dx);
    results.push_back(dw);
    results.push_back(db);
  }
  EXPECT_EQ(results[0], results[3]);
  EXPECT_EQ(results[1], results[4]);
  EXPECT_EQ(results[2], results[5]);
}

TEST(LayerNorm, FloatMatchesDouble) {
  const int N = 200, C = 256;
  std::mt19937_64 rng(34);
  const auto x = random_vector(N * C, rng, -3.0, 1.0), w = random_vector(C, rng),
             b = random_vector(C, rng), g = random_vector(N * C, rng);
  CpuBackend<double> d(2);
  CpuBackend<float> f(2);
  std::vector<double> out_d(N * C), mean_d(N), rstd_d(N), dx_d(N * C, 0.0), dw_d(C, 0.0);
  std::vector<float> out_f(N * C), mean_f(N), rstd_f(N), dx_f(N * C, 0.0f), dw_f(C, 0.0f);
  d.layernorm_forward(out_d.data(), mean_d.data(), rstd_d.data(), x.data(), w.data(), b.data(), N,
                      C, kEps);
  d.layernorm_backward(dx_d.data(), dw_d.data(), nullptr, g.data(), x.data(), w.data(),
                       mean_d.data(), rstd_d.data(), N, C, true);
  const auto x_f = testing::to_float(x), w_f = testing::to_float(w), b_f = testing::to_float(b),
             g_f = testing::to_float(g);
  f.layernorm_forward(out_f.data(), mean_f.data(), rstd_f.data(), x_f.data(), w_f.data(),
                      b_f.data(), N, C, kEps);
  f.layernorm_backward(dx_f.data(), dw_f.data(), nullptr, g_f.data(), x_f.data(), w_f.data(),
                       mean_f.data(), rstd_f.data(), N, C, true);
  EXPECT_LT(relative_error(testing::to_double(out_f), out_d), testing::kFloatTolerance);
  EXPECT_LT(relative_error(testing::to_double(dx_f), dx_d), testing::kFloatTolerance);
  EXPECT_LT(relative_error(testing::to_double(dw_f), dw_d), testing::kFloatTolerance);
}

}  // namespace
}  // namespace mpiasr
