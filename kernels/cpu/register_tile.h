// The AVX-512 register tile of the Winograd convolution (conv2d_winograd):
// for NP rows (1..8) and NV vectors of 16 columns (1..3),
//
//   out[p][v] = sum_k x[p][k x_step] w[k w_step + v]   (+= with add)
//
// x[p] and out[p] point at row p's operand and result
// (rows anywhere in memory; x_step floats between a row's operands); row k
// of w holds NV contiguous vectors, w_step floats after row k - 1. The NP x NV accumulators (at
// most 24) stay in registers over k: per k, NV loads of w, NP broadcasts of x, NP * NV fused
// multiply-adds. Only for code built for AVX-512 (between
// MPIASR_AVX512_BEGIN and MPIASR_AVX512_END), run where the kernels run at
// the avx512 level (kernels/cpu/simd.h). GCC only.
#pragma once

#include <cstring>
#include <utility>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define MPIASR_REGISTER_TILE 1
#define MPIASR_AVX512_BEGIN \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512bw,avx512dq,avx512vl,fma\")")
#define MPIASR_AVX512_END _Pragma("GCC pop_options")
#else
#define MPIASR_REGISTER_TILE 0
#endif

#if MPIASR_REGISTER_TILE

namespace mpiasr::register_tile {

constexpr int kLanes = 16;
constexpr int kMaxRows = 8;
constexpr int kMaxVectors = 3;
constexpr int kPanelColumns = kMaxVectors * kLanes;  // 48

MPIASR_AVX512_BEGIN

// 16 floats: one AVX-512 register.
typedef float Vec __attribute__((vector_size(64)));

template <int NP, int NV>
inline void multiply(float* const* out, const float* const* x, int x_step, const float* w,
                     int w_step, int K, bool add) {
  Vec acc[NP][NV] = {};
  if (add) {
    for (int p = 0; p < NP; ++p)
      for (int v = 0; v < NV; ++v) std::memcpy(&acc[p][v], out[p] + v * kLanes, sizeof(Vec));
  }
  for (int k = 0, xk = 0; k < K; ++k, xk += x_step, w += w_step) {
    Vec wv[NV];
    for (int v = 0; v < NV; ++v) std::memcpy(&wv[v], w + v * kLanes, sizeof(Vec));
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p) {
      const float xv = x[p][xk];
      for (int v = 0; v < NV; ++v) acc[p][v] += xv * wv[v];
    }
  }
  for (int p = 0; p < NP; ++p)
    for (int v = 0; v < NV; ++v) std::memcpy(out[p] + v * kLanes, &acc[p][v], sizeof(Vec));
}

template <int NV, int... N>
inline void multiply_rows(int rows, float* const* out, const float* const* x, int x_step,
                          const float* w, int w_step, int K, bool add,
                          std::integer_sequence<int, N...>) {
  ((rows == N + 1 ? (multiply<N + 1, NV>(out, x, x_step, w, w_step, K, add), true) : false) || ...);
}

// The tile for `rows` (1..8) rows and `columns` (16, 32 or 48) columns.
inline void multiply(int rows, int columns, float* const* out, const float* const* x, int x_step,
                     const float* w, int w_step, int K, bool add) {
  constexpr auto sizes = std::make_integer_sequence<int, kMaxRows>();
  if (columns == 3 * kLanes) {
    multiply_rows<3>(rows, out, x, x_step, w, w_step, K, add, sizes);
  } else if (columns == 2 * kLanes) {
    multiply_rows<2>(rows, out, x, x_step, w, w_step, K, add, sizes);
  } else {
    multiply_rows<1>(rows, out, x, x_step, w, w_step, K, add, sizes);
  }
}

MPIASR_AVX512_END

}  // namespace mpiasr::register_tile

#endif
