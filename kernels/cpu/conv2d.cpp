// Conv2d 3x3 stride 2 by im2col + GEMM in cache-sized chunks (see conv2d.h).
#include "kernels/cpu/conv2d.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "kernels/activations.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/conv2d_winograd.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/linear.h"
#include "kernels/cpu/parallel.h"
#include "src/base/error.h"

namespace mpiasr {

namespace {

// The subsampling's fused input side cuts conv.2's output into strips of 8
// rows of Winograd tiles where the transform runs (a strip of 40 tiles at
// `small`'s width; conv2d_winograd.cpp, kChunkTiles).
constexpr int kWinogradStripLines = 8 * kConv2dWinogradTileLines;

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

// Chunk c of image b, chunks of `per` lines.
Chunk make_chunk(const ConvShape& s, int per, int b, int c) {
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

}  // namespace
}  // namespace mpiasr

#define MPIASR_SIMD_SOURCE "kernels/cpu/conv2d_simd.h"
#include "kernels/cpu/simd_levels.h"

namespace mpiasr {
namespace {

// Wt[k, co] = W[co, 0, kh, kw], k = 3 kh + kw: the single-channel weight with
// output channels contiguous.
template <typename T>
void transpose_single_channel_weight(T* wt, const T* weight, int Cout) {
  for (int co = 0; co < Cout; ++co)
    for (int k = 0; k < 9; ++k) wt[int64_t(k) * Cout + co] = weight[int64_t(co) * 9 + k];
}

// dweight [Cout, 1, 3, 3] and dbias [Cout] += the sum of `count` gradient
// slots (each dWt [9, Cout] then the bias sum [Cout]), in slot order.
template <typename T>
void add_single_channel_slots(T* dweight, T* dbias, const T* slots, int count, int Cout) {
  for (int n = 0; n < count; ++n) {
    const T* grads = slots + size_t(n) * 10 * Cout;
    for (int co = 0; co < Cout; ++co) {
      if (dweight)
        for (int k = 0; k < 9; ++k) dweight[int64_t(co) * 9 + k] += grads[int64_t(k) * Cout + co];
      if (dbias) dbias[co] += grads[int64_t(9) * Cout + co];
    }
  }
}

// The input gradient of image b for Cin = 1, overwritten: pixel (i, j) adds
// sum_co dout[p, co] Wt[k, co] to input (2i + kh, 2j + kw).
template <typename T>
void single_channel_input_grad_image(T* dinp, const T* dout, const T* wt, const ConvShape& s,
                                     int b) {
  const int Cout = s.Cout;
  T* image = dinp + int64_t(b) * s.H * s.W;
  std::fill(image, image + int64_t(s.H) * s.W, T(0));
  const T* g = dout + int64_t(b) * s.Ho * s.Wo * Cout;
  for (int i = 0; i < s.Ho; ++i) {
    for (int j = 0; j < s.Wo; ++j, g += Cout) {
      for (int k = 0; k < 9; ++k) {
        const T* w = wt + int64_t(k) * Cout;
        T sum = T(0);
        for (int co = 0; co < Cout; ++co) sum += g[co] * w[co];
        image[int64_t(2 * i + k / 3) * s.W + 2 * j + k % 3] += sum;
      }
    }
  }
}

// The backward of the Cin = 1 layer, image by image: each image's weight and
// bias gradient goes to its own slot and the slots are summed in image order,
// so the result does not depend on the thread count.
template <typename T>
void single_channel_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                             const T* weight, const ConvShape& s) {
  const int B = s.B, Cout = s.Cout;
  std::vector<T> wt(size_t(9) * Cout);
  transpose_single_channel_weight(wt.data(), weight, Cout);
  const bool sums = dweight || dbias;
  // Per image: dWt [9, Cout] then the bias sum [Cout].
  std::vector<T> image_grads(sums ? size_t(B) * 10 * Cout : 0, T(0));
#pragma omp parallel for schedule(static) if (s.multiply_adds() >= kParallelMinMultiplyAdds)
  for (int b = 0; b < B; ++b) {
    if (sums) {
      MPIASR_SIMD_CALL(single_channel_weight_grad_rows, image_grads.data() + size_t(b) * 10 * Cout,
                       dout + int64_t(b) * s.Ho * s.Wo * Cout, static_cast<const T*>(nullptr), inp,
                       s, b, 0, s.Ho);
    }
    if (dinp) single_channel_input_grad_image(dinp, dout, wt.data(), s, b);
  }
  if (sums) add_single_channel_slots(dweight, dbias, image_grads.data(), B, Cout);
}

}  // namespace

template <typename T>
void cpu_conv2d_forward(T* out, const T* inp, const T* weight, const T* bias, int B, int Cin, int H,
                        int W, int Cout, bool relu) {
  const ConvShape s = make_shape(B, Cin, H, W, Cout);
  if constexpr (std::is_same_v<T, float>) {
    if (conv2d_winograd_available(Cin, Cout)) {
      conv2d_winograd_forward(out, inp, weight, bias, B, Cin, H, W, Cout, relu);
      return;
    }
  }
  const std::vector<T> bias_or_zero =
      bias ? std::vector<T>(bias, bias + Cout) : std::vector<T>(Cout);
  if (Cin == 1) {
    std::vector<T> wt(size_t(9) * Cout);
    transpose_single_channel_weight(wt.data(), weight, Cout);
#pragma omp parallel for schedule(static) \
    collapse(2) if (s.multiply_adds() >= kParallelMinMultiplyAdds)
    for (int b = 0; b < B; ++b) {
      for (int i = 0; i < s.Ho; ++i) {
        MPIASR_SIMD_CALL(single_channel_forward_line, out + (int64_t(b) * s.Ho + i) * s.Wo * Cout,
                         inp, wt.data(), bias_or_zero.data(), s, b, i, relu);
      }
    }
    return;
  }
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
        const Chunk chunk = make_chunk(s, s.lines_per_chunk(), b, c);
        const int rows = chunk.rows(s);
        T* out_chunk = out + chunk.first_row(s) * Cout;
        im2col(col.data(), inp, s, chunk);
        for (int r = 0; r < rows; ++r)
          std::memcpy(out_chunk + int64_t(r) * Cout, bias_or_zero.data(), sizeof(T) * Cout);
        // out_chunk [rows, Cout] = col [rows, K] Wr^T + bias
        blas_gemm<T>(false, true, rows, Cout, K, T(1), col.data(), K, wr.data(), K, T(1), out_chunk,
                     Cout);
        // ReLU while the chunk is still in cache.
        if (relu) cpu_relu_forward(out_chunk, out_chunk, size_t(rows) * Cout);
      }
    }
  }
}

template <typename T>
void cpu_conv2d_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                         const T* weight, int B, int Cin, int H, int W, int Cout) {
  const ConvShape s = make_shape(B, Cin, H, W, Cout);
  if (Cin == 1) {
    single_channel_backward(dinp, dweight, dbias, dout, inp, weight, s);
    return;
  }
  const int K = s.K();
  if (dbias) cpu_add_column_sums(dbias, dout, int64_t(B) * s.Ho * s.Wo, Cout);
  if constexpr (std::is_same_v<T, float>) {
    if (dweight && conv2d_winograd_weight_grad_chosen(Cin, Cout)) {
      conv2d_winograd_weight_grad(dweight, dout, inp, B, Cin, H, W, Cout);
      dweight = nullptr;
    }
  }
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
          const Chunk chunk = make_chunk(s, s.lines_per_chunk(), b, 2 * pc + phase);
          const int rows = chunk.rows(s);
          const T* dout_chunk = dout + chunk.first_row(s) * Cout;
          if (dweight) {
            im2col(col.data(), inp, s, chunk);
            // dWr [Cout, K] += dout_chunk^T [Cout, rows] col [rows, K]
            blas_gemm<T>(true, false, Cout, K, rows, T(1), dout_chunk, Cout, col.data(), K, T(1),
                         my_dwr, K);
          }
          if (dinp) {
            MPIASR_SIMD_CALL(add_chunk_input_grad,
                             dinp + (int64_t(chunk.b) * H + 2 * chunk.first_line) * W * Cin,
                             dcol.data(), dout, wr.data(), s, chunk);
          }
        }
      }  // implicit barrier: phase 0 finishes before phase 1 starts
    }
  }
  if (dweight) {
    add_thread_partials(dwr.data(), threads, size_t(Cout) * K);
    add_reordered_weight(dweight, dwr.data(), Cout, Cin);
  }
}

template <typename T>
void cpu_subsampling_first_conv_backward(T* dweight0, T* dbias0, const T* dout2, const T* a1,
                                         const T* x, const T* weight2, int B, int H, int W, int C) {
  const ConvShape first = make_shape(B, 1, H, W, C);
  const ConvShape second = make_shape(B, C, first.Ho, first.Wo, C);
  const int K = second.K();
  // The second convolution's input gradient: by Winograd strips where the
  // CPU has them (float, AVX2 or AVX-512), else the GEMM and col2im of
  // add_chunk_input_grad.
  std::vector<float> winograd_weight;
  if constexpr (std::is_same_v<T, float>) {
    if (conv2d_winograd_available(C, C))
      winograd_weight = conv2d_winograd_input_grad_weight(weight2, C, C);
  }
  const bool winograd = !winograd_weight.empty();
  std::vector<T> wr(winograd ? 0 : size_t(C) * K);
  if (!winograd) reorder_weight(wr.data(), weight2, C, C);
  // Chunks of output lines: kWinogradStripLines, or the GEMM's column
  // matrix size.
  const int chunk_lines = winograd ? kWinogradStripLines : second.lines_per_chunk();
  const int chunks = (second.Ho + chunk_lines - 1) / chunk_lines;
  // Per chunk: the first convolution's dWt [9, C] then its bias sum [C].
  const size_t slot = size_t(10) * C;
  std::vector<T> chunk_grads(size_t(B) * chunks * slot, T(0));
  const size_t a1_row = size_t(second.W) * C;
#pragma omp parallel if (second.multiply_adds() >= kParallelMinMultiplyAdds)
  {
    std::vector<T> dcol(winograd ? 0 : size_t(chunk_lines) * second.Wo * K);
    std::vector<float> scratch(winograd ? conv2d_winograd_strip_scratch_size(C, C) : 0);
    std::vector<T> strip(size_t(2 * chunk_lines + 1) * a1_row);
    // strip = the chunk's part of da1 before the ReLU.
    const auto chunk_input_grad = [&](const Chunk& chunk) {
      if constexpr (std::is_same_v<T, float>) {
        if (winograd) {
          conv2d_winograd_input_grad_strip(strip.data(), dout2, winograd_weight.data(),
                                           scratch.data(), B, C, second.H, second.W, C, chunk.b,
                                           chunk.first_line, chunk.lines);
          return;
        }
      }
      std::fill(strip.begin(), strip.begin() + int64_t(2 * chunk.lines + 1) * a1_row, T(0));
      MPIASR_SIMD_CALL(add_chunk_input_grad, strip.data(), dcol.data(), dout2, wr.data(), second,
                       chunk);
    };
#pragma omp for schedule(static) collapse(2)
    for (int b = 0; b < B; ++b) {
      for (int c = 0; c < chunks; ++c) {
        const Chunk chunk = make_chunk(second, chunk_lines, b, c);
        // The chunk's patches read a1 rows [first_row, first_row + strip_rows).
        const int first_row = 2 * chunk.first_line, strip_rows = 2 * chunk.lines + 1;
        chunk_input_grad(chunk);
        // Through the ReLU (a1 = relu(z) is positive exactly where z is) to
        // conv.0's gradients.
        MPIASR_SIMD_CALL(single_channel_weight_grad_rows,
                         chunk_grads.data() + (size_t(b) * chunks + c) * slot, strip.data(),
                         a1 + (int64_t(b) * second.H + first_row) * a1_row, x, first, b, first_row,
                         strip_rows);
      }
    }
  }
  add_single_channel_slots(dweight0, dbias0, chunk_grads.data(), B * chunks, C);
}

template void cpu_conv2d_forward<float>(float*, const float*, const float*, const float*, int, int,
                                        int, int, int, bool);
template void cpu_conv2d_forward<double>(double*, const double*, const double*, const double*, int,
                                         int, int, int, int, bool);
template void cpu_conv2d_backward<float>(float*, float*, float*, const float*, const float*,
                                         const float*, int, int, int, int, int);
template void cpu_conv2d_backward<double>(double*, double*, double*, const double*, const double*,
                                          const double*, int, int, int, int, int);

template void cpu_subsampling_first_conv_backward<float>(float*, float*, const float*, const float*,
                                                         const float*, const float*, int, int, int,
                                                         int);
template void cpu_subsampling_first_conv_backward<double>(double*, double*, const double*,
                                                          const double*, const double*,
                                                          const double*, int, int, int, int);

Conv2dMultiplyAdds cpu_conv2d_float_multiply_adds(int B, int Cin, int H, int W, int Cout) {
  const int64_t direct = int64_t(B) * conv2d_out_size(H) * conv2d_out_size(W) * 9 * Cin * Cout;
  if (!conv2d_winograd_available(Cin, Cout)) return {direct, direct, direct};
  return {conv2d_winograd_forward_multiply_adds(B, Cin, H, W, Cout),
          conv2d_winograd_input_grad_multiply_adds(B, Cin, H, W, Cout, kWinogradStripLines),
          conv2d_winograd_weight_grad_chosen(Cin, Cout)
              ? conv2d_winograd_weight_grad_multiply_adds(B, Cin, H, W, Cout)
              : direct};
}

}  // namespace mpiasr
