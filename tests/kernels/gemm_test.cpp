// GEMM and the linear layer against naive loops: every transpose combination,
// batched with strides and padded leading dimensions, on one and two threads
// (so both the batch-parallel and the panel-split paths run); the linear
// backward against central differences.
#include <gtest/gtest.h>
#include <omp.h>

#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm.h"
#include "src/base/error.h"
#include "tests/kernels/gradient_check.h"

namespace mpiasr {
namespace {

using testing::kGradTolerance;
using testing::random_vector;
using testing::relative_error;

// C[b] = alpha op(A[b]) op(B[b]) + beta C[b], element by element.
void naive_gemm(bool ta, bool tb, int M, int N, int K, double alpha, const std::vector<double>& A,
                int lda, int64_t sa, const std::vector<double>& B, int ldb, int64_t sb, double beta,
                std::vector<double>& C, int ldc, int64_t sc, int batch) {
  for (int b = 0; b < batch; ++b) {
    for (int m = 0; m < M; ++m) {
      for (int n = 0; n < N; ++n) {
        double sum = 0;
        for (int k = 0; k < K; ++k) {
          const double a = ta ? A[b * sa + k * lda + m] : A[b * sa + m * lda + k];
          const double bv = tb ? B[b * sb + n * ldb + k] : B[b * sb + k * ldb + n];
          sum += a * bv;
        }
        double& c = C[b * sc + m * ldc + n];
        c = alpha * sum + beta * c;
      }
    }
  }
}

struct GemmCase {
  int M, N, K, batch, threads;
};

class GemmTest : public ::testing::TestWithParam<GemmCase> {};

TEST_P(GemmTest, MatchesNaiveLoopsForEveryTransposeCombination) {
  const GemmCase p = GetParam();
  omp_set_num_threads(p.threads);
  std::mt19937_64 rng(7);
  for (int ta = 0; ta < 2; ++ta) {
    for (int tb = 0; tb < 2; ++tb) {
      // Leading dimensions padded by 3 and batch strides padded by 5.
      const int lda = (ta ? p.M : p.K) + 3, ldb = (tb ? p.K : p.N) + 3, ldc = p.N + 3;
      const int64_t sa = int64_t(ta ? p.K : p.M) * lda + 5;
      const int64_t sb = int64_t(tb ? p.N : p.K) * ldb + 5;
      const int64_t sc = int64_t(p.M) * ldc + 5;
      const std::vector<double> A = random_vector(sa * p.batch, rng);
      const std::vector<double> B = random_vector(sb * p.batch, rng);
      std::vector<double> C = random_vector(sc * p.batch, rng);
      std::vector<double> expected = C;
      naive_gemm(ta, tb, p.M, p.N, p.K, 0.75, A, lda, sa, B, ldb, sb, 0.5, expected, ldc, sc,
                 p.batch);
      cpu_gemm<double>(ta, tb, p.M, p.N, p.K, 0.75, A.data(), lda, sa, B.data(), ldb, sb, 0.5,
                       C.data(), ldc, sc, p.batch);
      EXPECT_LT(relative_error(C, expected), 1e-13) << "ta=" << ta << " tb=" << tb;
    }
  }
}

// Products of at least kParallelMinMultiplyAdds run on the whole team.
INSTANTIATE_TEST_SUITE_P(Shapes, GemmTest,
                         ::testing::Values(GemmCase{5, 7, 3, 1, 1},      // single thread
                                           GemmCase{5, 7, 3, 3, 2},      // too small to split
                                           GemmCase{150, 70, 60, 1, 2},  // rows split in panels
                                           GemmCase{40, 200, 70, 1, 2},  // columns split
                                           GemmCase{80, 70, 50, 2,
                                                    3},  // fewer matrices than threads
                                           GemmCase{64, 64, 64, 4, 2},  // parallel over the batch
                                           GemmCase{1, 1, 1, 4, 2}));

// A generic core chosen for a CPU with AVX-512 or AVX2 is replaced; a core
// that uses them, or a CPU without them, keeps OpenBLAS's choice.
TEST(OpenblasCore, GenericKernelsOnAVectorCpuAreReplaced) {
  const CpuVectorFeatures avx512{true, true}, avx2{false, true}, neither{};
  EXPECT_EQ(openblas_core_for("Prescott", avx512), "SkylakeX");
  EXPECT_EQ(openblas_core_for("Prescott", avx2), "Haswell");
  EXPECT_EQ(openblas_core_for("Sandybridge", avx2), "Haswell");
  EXPECT_EQ(openblas_core_for("Prescott", neither), "");
  EXPECT_EQ(openblas_core_for("Haswell", avx512), "");
  EXPECT_EQ(openblas_core_for("Zen", avx512), "");
  EXPECT_EQ(openblas_core_for("SkylakeX", avx512), "");
  EXPECT_EQ(openblas_core_for("SapphireRapids", avx512), "");
}

TEST(Gemm, ZeroInnerDimensionScalesC) {
  omp_set_num_threads(2);
  std::vector<double> C = {1, 2, 3, 4, 5, 6};
  cpu_gemm<double>(false, false, 2, 3, 0, 1.0, nullptr, 1, 0, nullptr, 3, 0, 2.0, C.data(), 3, 0,
                   1);
  EXPECT_EQ(C, (std::vector<double>{2, 4, 6, 8, 10, 12}));
}

TEST(Gemm, RejectsLeadingDimensionSmallerThanRow) {
  std::vector<double> A(6), B(6), C(4);
  EXPECT_THROW(cpu_gemm<double>(false, false, 2, 2, 3, 1.0, A.data(), 2, 0, B.data(), 2, 0, 0.0,
                                C.data(), 2, 0, 1),
               Error);
}

// out = inp W^T + bias, naive.
std::vector<double> naive_linear(const std::vector<double>& inp, const std::vector<double>& w,
                                 const std::vector<double>& bias, int M, int K, int N) {
  std::vector<double> out(size_t(M) * N);
  for (int m = 0; m < M; ++m)
    for (int n = 0; n < N; ++n) {
      double sum = bias.empty() ? 0.0 : bias[n];
      for (int k = 0; k < K; ++k) sum += inp[m * K + k] * w[n * K + k];
      out[m * N + n] = sum;
    }
  return out;
}

TEST(Linear, ForwardMatchesNaiveLoops) {
  const int M = 37, K = 19, N = 23;
  std::mt19937_64 rng(11);
  const auto inp = random_vector(M * K, rng), w = random_vector(N * K, rng),
             bias = random_vector(N, rng);
  for (int threads : {1, 2}) {
    CpuBackend<double> backend(threads);
    std::vector<double> out(M * N);
    backend.linear_forward(out.data(), inp.data(), w.data(), bias.data(), M, K, N);
    EXPECT_LT(relative_error(out, naive_linear(inp, w, bias, M, K, N)), 1e-14);
    backend.linear_forward(out.data(), inp.data(), w.data(), nullptr, M, K, N);
    EXPECT_LT(relative_error(out, naive_linear(inp, w, {}, M, K, N)), 1e-14);
  }
}

TEST(Linear, BackwardMatchesFiniteDifferencesAndAccumulates) {
  const int M = 6, K = 5, N = 4;
  std::mt19937_64 rng(12);
  auto inp = random_vector(M * K, rng), w = random_vector(N * K, rng), bias = random_vector(N, rng);
  const auto g = random_vector(M * N, rng);
  CpuBackend<double> backend(2);
  auto loss = [&] {
    std::vector<double> out(M * N);
    backend.linear_forward(out.data(), inp.data(), w.data(), bias.data(), M, K, N);
    return testing::dot(g, out);
  };
  std::vector<double> dinp(M * K, 99.0);  // overwritten
  const auto dw0 = random_vector(N * K, rng), db0 = random_vector(N, rng);
  auto dw = dw0, db = db0;  // accumulated into
  backend.linear_backward(dinp.data(), dw.data(), db.data(), g.data(), inp.data(), w.data(), M, K,
                          N);
  EXPECT_LT(relative_error(dinp, testing::numeric_gradient(inp, loss)), kGradTolerance);
  EXPECT_LT(relative_error(testing::minus(dw, dw0), testing::numeric_gradient(w, loss)),
            kGradTolerance);
  EXPECT_LT(relative_error(testing::minus(db, db0), testing::numeric_gradient(bias, loss)),
            kGradTolerance);
}

TEST(Linear, NullGradientsAreSkipped) {
  const int M = 3, K = 2, N = 2;
  std::vector<double> inp(M * K, 1.0), w(N * K, 1.0), g(M * N, 1.0), dinp(M * K, 0.0);
  CpuBackend<double> backend(1);
  backend.linear_backward(dinp.data(), nullptr, nullptr, g.data(), inp.data(), w.data(), M, K, N);
  EXPECT_EQ(dinp, std::vector<double>(M * K, 2.0));
  std::vector<double> db(N, 0.0);
  backend.linear_backward(nullptr, nullptr, db.data(), g.data(), inp.data(), w.data(), M, K, N);
  EXPECT_EQ(db, std::vector<double>(N, 3.0));
}

TEST(Linear, FloatMatchesDouble) {
  const int M = 50, K = 144, N = 60;
  std::mt19937_64 rng(13);
  const auto inp = random_vector(M * K, rng), w = random_vector(N * K, rng),
             bias = random_vector(N, rng);
  CpuBackend<double> d(2);
  CpuBackend<float> f(2);
  std::vector<double> out_d(M * N);
  std::vector<float> out_f(M * N);
  d.linear_forward(out_d.data(), inp.data(), w.data(), bias.data(), M, K, N);
  const auto inp_f = testing::to_float(inp), w_f = testing::to_float(w),
             bias_f = testing::to_float(bias);
  f.linear_forward(out_f.data(), inp_f.data(), w_f.data(), bias_f.data(), M, K, N);
  EXPECT_LT(relative_error(testing::to_double(out_f), out_d), testing::kFloatTolerance);
}

}  // namespace
}  // namespace mpiasr
