// The 3x3 stride-2 convolution of conv2d.h (same layouts and formula) by a
// strided Winograd transform, for float on a CPU with AVX2 or AVX-512: fewer
// multiplies than the direct sum, the same result up to rounding.
//
//   out[b, i, j, co] = bias[co] + sum_{kh, kw, ci} inp[b, 2i + kh, 2j + kw, ci] W[co, ci, kh, kw]
//
// One axis first. Output pixels y[0..3] of a tile read inputs x[0..8]:
//   y[i] = w0 x[2i] + w1 x[2i + 1] + w2 x[2i + 2]
// The even inputs e[k] = x[2k] meet the two taps (w0, w2) at stride 1, a
// correlation that Winograd's F(4, 2) computes with 5 products instead of 8
// (interpolation points 0, 1, -1, 2 and infinity); the odd inputs meet w1
// alone, 4 products. So 9 products make 4 outputs where the direct sum takes
// 12. With the 9 x 9 input matrix Bt, the 9 x 3 weight matrix G and the
// 4 x 9 output matrix At (conv2d_winograd.cpp),
//   y = At [(G w) . (Bt x)]
// and in two dimensions a tile of 4 x 4 output pixels, reading 9 x 9 input
// pixels X, is
//   Y = At [(G W G^T) . (Bt X Bt^T)] At^T
// with 81 products per channel pair instead of 144: for each of the 81
// points p, a matrix product over the channels,
//   M[p][tile, co] = sum_ci V[p][tile, ci] U[p][ci, co],
//   V[p] = (Bt X Bt^T)[p] (the input transform), U[p] = (G W G^T)[p].
// Tiles past the image's edge read zeros and their outputs are dropped: at
// the `small` model's 99 x 19 output pixels, 100 x 20 are computed, so the
// products are 0.60 of the direct convolution's.
//
// The input gradient, with dM[p] = (At^T dY At)[p] (the output gradient's
// transform): dV[p] = dM[p] U[p]^T, dX += Bt^T dV Bt (tiles overlap by one
// input pixel).
//
// The weight gradient, dU[p] = sum over tiles V[p]^T dM[p], dW = G^T dU G,
// runs on tiles of 2 x 2 output pixels instead: F(4, 2)'s G (1/2, 1/6,
// 1/3) made its error about 1e-6 of the largest value against 1e-7, and 2
// ranks and 1 rank with accumulation 2 differed by 1.2e-5 after 10 steps
// (tests/integration/mpi_train_equivalence.sh, whose bound is 1e-5). Along
// one axis, 2 outputs read x[0..4]; the even inputs meet taps w0, w2 by
// F(2, 2), 3 products instead of 4:
//   m0 = w0 (x0 - x2), m1 = (w0 + w2) x2, m2 = w2 (x4 - x2),
//   y0 = m0 + m1 + w1 x1, y1 = m1 + m2 + w1 x3,
// so Bt, At and G hold only 0, 1 and -1, and the weight gradient's error
// stays that of the direct sum. 25 points take the place of 36 products;
// at `small`'s 99 x 19 output pixels, 100 x 20 are computed, 0.74 of the
// direct products.
//
// Layouts: the transforms run over vectors of channels (channels-last, one
// register of the instruction-set level: 16 floats with AVX-512, 8 with
// AVX2), in registers, so they are elementwise over C. A chunk of 64 tiles
// keeps V and M as [point][tile][C] (3 MB each at C = 144); the point
// products are a register tile of R rows by a panel of P columns (R x P:
// 8 x 48 with AVX-512, 6 x 16 with AVX2; conv2d_winograd_simd.h), with the
// tiles as rows and the point's U[p] [C, C], stored as panels of P
// columns, as the panel. Bt and At hold small integers; G holds 1/2, 1/6
// and 1/3. The weight's transform runs in double, once per call. The
// weight gradient's chunks of 64 tiles keep V and dM as [point][tile][C]
// too (dM holds 9 points: along an axis, At^T dY has 3 distinct values);
// its register tile takes R input channels as rows (their operands C
// floats apart along the tiles) and dM's tiles as the panel, and sums each
// R x P block into the taps its point reaches in the thread's dW
// [tap][Cin][Cout] (750 KB at C = 144): straight into the tap for the 16
// points that reach one, through a block for the other 9.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mpiasr {

// Whether this process runs the Winograd convolution (forward and input
// gradient) for these channel counts: the kernels run at the avx2 or avx512
// level (kernels/cpu/simd.h: the CPU has AVX2 or AVX-512 and MPIASR_SIMD
// does not cap it below avx2) and Cin, Cout are multiples of 16 (a whole
// number of registers of channels at either level).
bool conv2d_winograd_available(int Cin, int Cout);

// Whether the convolution's dispatcher (conv2d.h) takes the weight gradient
// by the transform: where conv2d_winograd_available, at the avx512 level
// only. At the avx2 level im2col + GEMM was faster: at the `small`
// subsampling's conv.2, 1 thread, on an AMD EPYC (Zen 3, AVX2, OpenBLAS's
// Zen kernels), 137-139 ms against 154-155 ms by the transform (3
// alternations of cpu_ops_bench's BM_conv2d_backward/1/2).
bool conv2d_winograd_weight_grad_chosen(int Cin, int Cout);

// Output lines of a tile: callers that cut the output into strips of lines
// waste the least with multiples of it.
constexpr int kConv2dWinogradTileLines = 4;

// out [B, Ho, Wo, Cout] = conv2d(inp [B, H, W, Cin], weight, bias) (then ReLU
// with relu); bias may be null.
void conv2d_winograd_forward(float* out, const float* inp, const float* weight, const float* bias,
                             int B, int Cin, int H, int W, int Cout, bool relu);

// The input gradient by strips: output lines [first_line, first_line + lines)
// of image b write their part of input rows [2 first_line, 2 first_line +
// 2 lines + 1) to strip [2 lines + 1, W, Cin]:
//   strip[r, x, ci] = sum dout[b, i, j, co] W[co, ci, kh, kw]
//                     over 2 (i - first_line) + kh = r, 2 j + kw = x,
//                     first_line <= i < first_line + lines, co
// Where two strips share a row, each holds its own part (the subsampling's
// fused backward, conv2d.h, sums them). transformed_weight comes from
// conv2d_winograd_input_grad_weight, called at the same instruction-set
// level (its panels are the level's); scratch is room for
// conv2d_winograd_strip_scratch_size floats, one per thread.
std::vector<float> conv2d_winograd_input_grad_weight(const float* weight, int Cin, int Cout);
size_t conv2d_winograd_strip_scratch_size(int Cin, int Cout);
void conv2d_winograd_input_grad_strip(float* strip, const float* dout,
                                      const float* transformed_weight, float* scratch, int B,
                                      int Cin, int H, int W, int Cout, int b, int first_line,
                                      int lines);

// dweight [Cout, Cin, 3, 3] += the weight gradient of conv2d(inp [B, H, W,
// Cin]) for the output gradient dout [B, Ho, Wo, Cout], on 2 x 2 tiles.
void conv2d_winograd_weight_grad(float* dweight, const float* dout, const float* inp, int B,
                                 int Cin, int H, int W, int Cout);

// The multiply-adds of the point products (the matrix products over the
// channels) that a call above runs: tiles x points x Cin x Cout, the tiles
// cut by the image's edge counted whole, for the benchmarks' FLOP counts.
// The transforms (additions and multiplications by the matrices' small
// constants, elementwise over the channels) are not counted, as the
// benchmarks count no elementwise work. The direct convolution's count is
// B Ho Wo 9 Cin Cout. Pure arithmetic: they answer on any CPU.
int64_t conv2d_winograd_forward_multiply_adds(int B, int Cin, int H, int W, int Cout);
// The input gradient of a whole batch, cut into strips of `strip_lines`
// output lines (the last strip shorter) as conv2d_winograd_input_grad_strip
// is called.
int64_t conv2d_winograd_input_grad_multiply_adds(int B, int Cin, int H, int W, int Cout,
                                                 int strip_lines);
int64_t conv2d_winograd_weight_grad_multiply_adds(int B, int Cin, int H, int W, int Cout);

}  // namespace mpiasr
