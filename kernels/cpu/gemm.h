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

#include <chrono>
#include <cstdint>
#include <string>

namespace mpiasr {

// The BLAS library and the kernel set it runs on this CPU, for `mpiasr
// --version`: "OpenBLAS 0.3.21 DYNAMIC_ARCH ..., core Zen".
std::string blas_description();

// What OpenBLAS should be told to run on (OPENBLAS_CORETYPE, read as it is
// loaded) when it did not recognise the CPU: a DYNAMIC_ARCH OpenBLAS falls
// back to generic kernels for a model newer than itself (Debian's 0.3.21
// takes an Emerald Rapids Xeon, family 6 model 207, for a Prescott, and its
// sgemm runs at a fifth of the speed). From the core OpenBLAS chose and the
// instruction sets the CPU has: "SkylakeX" with AVX-512 (F, BW, DQ, VL),
// "Haswell" with AVX2 and FMA; empty when OpenBLAS's choice stands (a core
// whose kernels use AVX2 or AVX-512, or a CPU without them).
struct CpuVectorFeatures {
  bool avx512 = false;    // AVX-512 F, BW, DQ and VL
  bool avx2_fma = false;  // AVX2 and FMA
};
// The vector instruction sets of this process's CPU.
CpuVectorFeatures cpu_vector_features();
std::string openblas_core_for(const std::string& chosen_core, const CpuVectorFeatures& cpu);
// The same for this process: OpenBLAS's choice and this CPU.
std::string openblas_core_to_request();
// The core OpenBLAS runs on ("Haswell", "Prescott", ...).
std::string openblas_core();

// How long OpenBLAS's own worker threads poll (sched_yield) for the next job
// before they sleep: 2^N TSC ticks, N = OPENBLAS_THREAD_TIMEOUT (4..30,
// default 28), given as 2^N ns, which covers a TSC of 1 GHz or more. The
// backend never starts them; a benchmark that times OpenBLAS's own threading
// waits this long afterwards, so that what it times next has the cores.
std::chrono::nanoseconds openblas_worker_poll_time();

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
