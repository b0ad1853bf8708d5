// Conv2d 3x3 stride 2 by im2col + GEMM in cache-sized chunks (see conv2d.h).
#include "kernels/cpu/conv2d.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/parallel.h"
#include "src/base/error.h"

namespace mpiasr {

namespace {

// Target size of a chunk's column matrix, in elements; a chunk is a whole
// number of output lines (at least one).
constexpr int64_t kChunkElements = 256 * 1024;

struct ConvShape {
  int B, Cin, H, W, Cout, Ho, Wo;
  int K() const { return 9 * Cin; }
  int64_t multiply_adds() const { return int64_t(B) * Ho * Wo * K() * Cout; }
  int lines_per_chunk() const {
    return int(std::clamp<int64_t>(kChunkElements / (int64_t(Wo) * K()), 1, Ho));
  }
  int chunks_per_image() const { return (Ho + lines_per_chunk() - 1) / lines_per_chunk(); }
};

ConvShape make_shape(int B, int Cin, int H, int W, int Cout) {
  MPIASR_CHECK(B >= 0 && Cin > 0 && Cout > 0 && H >= 3 && W >= 3,
               "conv2d needs at least a 3x3 input: B=" << B << " Cin=" << Cin << " H=" << H
                                                       << " W=" << W << " Cout=" << Cout);
  return {B, Cin, H, W, Cout, conv2d_out_size(H), conv2d_out_size(W)};
}

// Chunk c of image b covers output lines [first_line, first_line + lines).
struct Chunk {
  int b, first_line, lines;
  int64_t first_row(const ConvShape& s) const { return (int64_t(b) * s.Ho + first_line) * s.Wo; }
  int rows(const ConvShape& s) const { return lines * s.Wo; }
};

Chunk make_chunk(const ConvShape& s, int b, int c) {
  const int per = s.lines_per_chunk();
  const int first = c * per;
  return {b, first, std::min(per, s.Ho - first)};
}

// Wr[co, kh, kw, ci] = W[co, ci, kh, kw]
template <typename T>
void reorder_weight(T* wr, const T* weight, int Cout, int Cin) {
  for (int co = 0; co < Cout; ++co)
    for (int ci = 0; ci < Cin; ++ci)
      for (int k = 0; k < 9; ++k)
        wr[(int64_t(co) * 9 + k) * Cin + ci] = weight[(int64_t(co) * Cin + ci) * 9 + k];
}

// W[co, ci, kh, kw] += dWr[co, kh, kw, ci]
template <typename T>
void add_reordered_weight(T* weight, const T* wr, int Cout, int Cin) {
  for (int co = 0; co < Cout; ++co)
    for (int ci = 0; ci < Cin; ++ci)
      for (int k = 0; k < 9; ++k)
        weight[(int64_t(co) * Cin + ci) * 9 + k] += wr[(int64_t(co) * 9 + k) * Cin + ci];
}

// The address of input pixel (2i + kh, 2j) of image b: the start of the 3 * Cin
// contiguous values that kernel row kh of output pixel (i, j) reads.
template <typename T>
T* patch_row(T* inp, const ConvShape& s, int b, int i, int j, int kh) {
  return inp + ((int64_t(b) * s.H + 2 * i + kh) * s.W + 2 * j) * s.Cin;
}

// col [rows, 9 Cin] of a chunk.
template <typename T>
void im2col(T* col, const T* inp, const ConvShape& s, const Chunk& chunk) {
  const int span = 3 * s.Cin;
  T* dst = col;
  for (int i = chunk.first_line; i < chunk.first_line + chunk.lines; ++i) {
    for (int j = 0; j < s.Wo; ++j) {
      for (int kh = 0; kh < 3; ++kh, dst += span) {
        std::memcpy(dst, patch_row(inp, s, chunk.b, i, j, kh), sizeof(T) * span);
      }
    }
  }
}

// dinp += col2im(dcol) for a chunk.
template <typename T>
void col2im_add(T* dinp, const T* dcol, const ConvShape& s, const Chunk& chunk) {
  const int span = 3 * s.Cin;
  const T* src = dcol;
  for (int i = chunk.first_line; i < chunk.first_line + chunk.lines; ++i) {
    for (int j = 0; j < s.Wo; ++j) {
      for (int kh = 0; kh < 3; ++kh, src += span) {
        T* dst = patch_row(dinp, s, chunk.b, i, j, kh);
        for (int e = 0; e < span; ++e) dst[e] += src[e];
      }
    }
  }
}

}  // namespace

template <typename T>
void cpu_conv2d_forward(T* out, const T* inp, const T* weight, const T* bias, int B, int Cin, int H,
                        int W, int Cout) {
  const ConvShape s = make_shape(B, Cin, H, W, Cout);
  const int K = s.K();
  std::vector<T> wr(size_t(Cout) * K);
  reorder_weight(wr.data(), weight, Cout, Cin);
  const int chunks = s.chunks_per_image();
#pragma omp parallel if (s.multiply_adds() >= kParallelMinMultiplyAdds)
  {
    std::vector<T> col(size_t(s.lines_per_chunk()) * s.Wo * K);
#pragma omp for schedule(static) collapse(2)
    for (int b = 0; b < B; ++b) {
      for (int c = 0; c < chunks; ++c) {
        const Chunk chunk = make_chunk(s, b, c);
        const int rows = chunk.rows(s);
        T* out_chunk = out + chunk.first_row(s) * Cout;
        im2col(col.data(), inp, s, chunk);
        T beta = T(0);
        if (bias) {
          for (int r = 0; r < rows; ++r)
            std::memcpy(out_chunk + int64_t(r) * Cout, bias, sizeof(T) * Cout);
          beta = T(1);
        }
        // out_chunk [rows, Cout] = col [rows, K] Wr^T + beta out_chunk
        blas_gemm<T>(false, true, rows, Cout, K, T(1), col.data(), K, wr.data(), K, beta, out_chunk,
                     Cout);
      }
    }
  }
}

template <typename T>
void cpu_conv2d_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                         const T* weight, int B, int Cin, int H, int W, int Cout) {
  const ConvShape s = make_shape(B, Cin, H, W, Cout);
  const int K = s.K();
  if (dbias) cpu_add_column_sums(dbias, dout, int64_t(B) * s.Ho * s.Wo, Cout);
  if (!dinp && !dweight) return;
  std::vector<T> wr(size_t(Cout) * K);
  reorder_weight(wr.data(), weight, Cout, Cin);
  const int chunks = s.chunks_per_image();
  const bool parallel = s.multiply_adds() >= kParallelMinMultiplyAdds;
  const int threads = parallel ? omp_get_max_threads() : 1;
  // One private dWr per thread, summed at the end.
  std::vector<T> dwr(dweight ? size_t(threads) * Cout * K : 0, T(0));
#pragma omp parallel if (parallel)
  {
    const size_t col_size = size_t(s.lines_per_chunk()) * s.Wo * K;
    std::vector<T> col(dweight ? col_size : 0);
    std::vector<T> dcol(dinp ? col_size : 0);
    T* my_dwr = dweight ? dwr.data() + size_t(omp_get_thread_num()) * Cout * K : nullptr;
    if (dinp) {
      const size_t image = size_t(H) * W * Cin;
#pragma omp for schedule(static)
      for (int b = 0; b < B; ++b) std::memset(dinp + b * image, 0, sizeof(T) * image);
    }
    for (int phase = 0; phase < 2; ++phase) {
      const int phase_chunks = (chunks - phase + 1) / 2;
#pragma omp for schedule(static) collapse(2)
      for (int b = 0; b < B; ++b) {
        for (int pc = 0; pc < phase_chunks; ++pc) {
          const Chunk chunk = make_chunk(s, b, 2 * pc + phase);
          const int rows = chunk.rows(s);
          const T* dout_chunk = dout + chunk.first_row(s) * Cout;
          if (dweight) {
            im2col(col.data(), inp, s, chunk);
            // dWr [Cout, K] += dout_chunk^T [Cout, rows] col [rows, K]
            blas_gemm<T>(true, false, Cout, K, rows, T(1), dout_chunk, Cout, col.data(), K, T(1),
                         my_dwr, K);
          }
          if (dinp) {
            // dcol [rows, K] = dout_chunk [rows, Cout] Wr [Cout, K]
            blas_gemm<T>(false, false, rows, K, Cout, T(1), dout_chunk, Cout, wr.data(), K, T(0),
                         dcol.data(), K);
            col2im_add(dinp, dcol.data(), s, chunk);
          }
        }
      }  // implicit barrier: phase 0 finishes before phase 1 starts
    }
  }
  if (dweight) {
    for (int t = 1; t < threads; ++t) {
      const T* other = dwr.data() + size_t(t) * Cout * K;
      for (size_t e = 0; e < size_t(Cout) * K; ++e) dwr[e] += other[e];
    }
    add_reordered_weight(dweight, dwr.data(), Cout, Cin);
  }
}

template void cpu_conv2d_forward<float>(float*, const float*, const float*, const float*, int, int,
                                        int, int, int);
template void cpu_conv2d_forward<double>(double*, const double*, const double*, const double*, int,
                                         int, int, int, int);
template void cpu_conv2d_backward<float>(float*, float*, float*, const float*, const float*,
                                         const float*, int, int, int, int, int);
template void cpu_conv2d_backward<double>(double*, double*, double*, const double*, const double*,
                                          const double*, int, int, int, int, int);

}  // namespace mpiasr
