// The check of GEMM arguments, one implementation for the CPU (cblas) and CUDA
// (cuBLAS) backends. Row-major C [M, N] = op(A) [M, K] op(B) [K, N]: a row of
// op(A) stored untransposed holds K values (M when transposed), a row of
// op(B) N values (K when transposed), a row of C N values; each leading
// dimension must cover its row (and be at least 1).
#pragma once

#include <algorithm>

#include "src/base/error.h"

namespace mpiasr {

// Throws Error (kFailure) naming every dimension when a leading dimension is
// too small.
inline void check_gemm_arguments(bool trans_a, bool trans_b, int M, int N, int K, int lda, int ldb,
                                 int ldc) {
  MPIASR_CHECK(
      lda >= std::max(1, trans_a ? M : K) && ldb >= std::max(1, trans_b ? K : N) && ldc >= N,
      "gemm leading dimensions too small: M=" << M << " N=" << N << " K=" << K << " lda=" << lda
                                              << " ldb=" << ldb << " ldc=" << ldc);
}

}  // namespace mpiasr
