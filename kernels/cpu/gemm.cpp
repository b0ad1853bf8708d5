// Batched, threaded GEMM over single-threaded cblas calls (see gemm.h).
#include "kernels/cpu/gemm.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstdlib>
#include <initializer_list>

#include "kernels/cpu/parallel.h"
#include "kernels/gemm_check.h"
#include "src/base/error.h"

namespace mpiasr {

namespace {

// Panels are cut at multiples of this many rows or columns, so each keeps the
// full register blocking of the OpenBLAS kernels.
constexpr int kPanelAlign = 16;

void cblas_gemm(bool ta, bool tb, int M, int N, int K, float alpha, const float* A, int lda,
                const float* B, int ldb, float beta, float* C, int ldc) {
  cblas_sgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
              K, alpha, A, lda, B, ldb, beta, C, ldc);
}

void cblas_gemm(bool ta, bool tb, int M, int N, int K, double alpha, const double* A, int lda,
                const double* B, int ldb, double beta, double* C, int ldc) {
  cblas_dgemm(CblasRowMajor, ta ? CblasTrans : CblasNoTrans, tb ? CblasTrans : CblasNoTrans, M, N,
              K, alpha, A, lda, B, ldb, beta, C, ldc);
}

// C = beta C without reading A and B (K == 0, where BLAS may skip the scaling).
template <typename T>
void scale_matrix(T* C, int M, int N, int ldc, T beta) {
  for (int m = 0; m < M; ++m) {
    T* row = C + int64_t(m) * ldc;
    if (beta == T(0)) {
      std::fill(row, row + N, T(0));
    } else {
      for (int n = 0; n < N; ++n) row[n] *= beta;
    }
  }
}

}  // namespace

std::string openblas_core_for(const std::string& chosen_core, const CpuVectorFeatures& cpu) {
  const auto one_of = [&](std::initializer_list<const char*> cores) {
    return std::find(cores.begin(), cores.end(), chosen_core) != cores.end();
  };
  // The cores whose kernels use AVX2 and FMA (or AVX-512): a choice among
  // them stands.
  if (one_of({"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"})) return "";
  if (cpu.avx512) return "SkylakeX";
  if (cpu.avx2_fma) return "Haswell";
  return "";
}

CpuVectorFeatures cpu_vector_features() {
  CpuVectorFeatures cpu;
#if defined(__x86_64__)
  __builtin_cpu_init();
  cpu.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  cpu.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#endif
  return cpu;
}

std::string openblas_core_to_request() {
  return openblas_core_for(openblas_core(), cpu_vector_features());
}

std::string openblas_core() {
  return openblas_get_corename();
}

std::string blas_description() {
  std::string config = openblas_get_config();
  while (!config.empty() && config.back() == ' ') config.pop_back();
  return config + ", core " + openblas_core();
}

std::chrono::nanoseconds openblas_worker_poll_time() {
  const char* timeout = std::getenv("OPENBLAS_THREAD_TIMEOUT");
  const int n = std::clamp(timeout ? std::atoi(timeout) : 28, 4, 30);
  return std::chrono::nanoseconds(int64_t(1) << n);
}

template <typename T>
void blas_gemm(bool trans_a, bool trans_b, int M, int N, int K, T alpha, const T* A, int lda,
               const T* B, int ldb, T beta, T* C, int ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0) {
    scale_matrix(C, M, N, ldc, beta);
    return;
  }
  cblas_gemm(trans_a, trans_b, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
}

template <typename T>
void cpu_gemm(bool trans_a, bool trans_b, int M, int N, int K, T alpha, const T* A, int lda,
              int64_t stride_a, const T* B, int ldb, int64_t stride_b, T beta, T* C, int ldc,
              int64_t stride_c, int batch) {
  if (M <= 0 || N <= 0 || batch <= 0) return;
  check_gemm_arguments(trans_a, trans_b, M, N, K, lda, ldb, ldc);
  const int64_t work = int64_t(M) * N * std::max(K, 1) * batch;
  const int threads =
      omp_in_parallel() || work < kParallelMinMultiplyAdds ? 1 : omp_get_max_threads();
  if (threads == 1 || batch >= threads) {
#pragma omp parallel for schedule(static) if (threads > 1 && batch > 1)
    for (int b = 0; b < batch; ++b) {
      blas_gemm(trans_a, trans_b, M, N, K, alpha, A + b * stride_a, lda, B + b * stride_b, ldb,
                beta, C + b * stride_c, ldc);
    }
    return;
  }
  // Fewer matrices than threads: cut each product along its longer side.
  const bool split_rows = M >= N;
  const int extent = split_rows ? M : N;
  int panel = (extent + threads - 1) / threads;
  panel = (panel + kPanelAlign - 1) / kPanelAlign * kPanelAlign;
  const int panels = (extent + panel - 1) / panel;
#pragma omp parallel for schedule(static) collapse(2)
  for (int b = 0; b < batch; ++b) {
    for (int p = 0; p < panels; ++p) {
      const T* Ab = A + b * stride_a;
      const T* Bb = B + b * stride_b;
      T* Cb = C + b * stride_c;
      const int begin = p * panel;
      const int size = std::min(panel, extent - begin);
      if (split_rows) {
        // Rows [begin, begin + size) of op(A) and C.
        const T* Ap = trans_a ? Ab + begin : Ab + int64_t(begin) * lda;
        blas_gemm(trans_a, trans_b, size, N, K, alpha, Ap, lda, Bb, ldb, beta,
                  Cb + int64_t(begin) * ldc, ldc);
      } else {
        // Columns [begin, begin + size) of op(B) and C.
        const T* Bp = trans_b ? Bb + int64_t(begin) * ldb : Bb + begin;
        blas_gemm(trans_a, trans_b, M, size, K, alpha, Ab, lda, Bp, ldb, beta, Cb + begin, ldc);
      }
    }
  }
}

template void blas_gemm<float>(bool, bool, int, int, int, float, const float*, int, const float*,
                               int, float, float*, int);
template void blas_gemm<double>(bool, bool, int, int, int, double, const double*, int,
                                const double*, int, double, double*, int);
template void cpu_gemm<float>(bool, bool, int, int, int, float, const float*, int, int64_t,
                              const float*, int, int64_t, float, float*, int, int64_t, int);
template void cpu_gemm<double>(bool, bool, int, int, int, double, const double*, int, int64_t,
                               const double*, int, int64_t, double, double*, int, int64_t, int);

}  // namespace mpiasr
