// Matrix multiplication on the CPU through OpenBLAS (cblas), row-major:
//   C = alpha * op(A) op(B) + beta * C,  op(X) = X or X^T,  C is M x N, K inner.
//
// Threading: every OpenBLAS call runs on one thread (the backend keeps
// OpenBLAS at one thread); parallelism comes from OpenMP around the calls, so
// only one thread pool ever runs. cpu_gemm splits the work over the current
// OpenMP team: over the batch when there are at least as many matrices as
// threads, otherwise each product is cut into panels of rows (or columns, if
// N > M) and the panels run in parallel.
#pragma once

#include <cstdint>
#include <string>

namespace mpiasr {

// The BLAS library and the kernel set it runs on this CPU, for `mpiasr
// --version`: "OpenBLAS 0.3.21 DYNAMIC_ARCH ..., core Zen".
std::string blas_description();

// One cblas_?gemm call on the calling thread (for use inside parallel regions).
template <typename T>
void blas_gemm(bool trans_a, bool trans_b, int M, int N, int K, T alpha, const T* A, int lda,
               const T* B, int ldb, T beta, T* C, int ldc);

// Batched GEMM: C[b] = alpha op(A[b]) op(B[b]) + beta C[b], b < batch, with
// A[b] = A + b * stride_a (likewise B, C), parallel over the OpenMP team.
template <typename T>
void cpu_gemm(bool trans_a, bool trans_b, int M, int N, int K, T alpha, const T* A, int lda,
              int64_t stride_a, const T* B, int ldb, int64_t stride_b, T beta, T* C, int ldc,
              int64_t stride_c, int batch);

}  // namespace mpiasr
