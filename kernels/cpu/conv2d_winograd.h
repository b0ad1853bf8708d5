// The 3x3 stride-2 convolution of conv2d.h (same layouts and formula) by a
// strided Winograd transform, for float on an AVX-512 CPU: fewer multiplies
// than the direct sum, the same result up to rounding.
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
// The weight gradient stays im2col + GEMM (conv2d.h). By this transform
// (dU[p] = sum over tiles V[p]^T dM[p], dW = G^T dU G) it ran 1.1x as fast
// at `small`'s conv.2, but its error, about 1e-6 of the largest value
// against 1e-7, made 2 ranks and 1 rank with accumulation 2 differ by
// 1.2e-5 after 10 steps (tests/integration/mpi_train_equivalence.sh, whose
// bound is 1e-5) instead of 1.3e-7.
//
// Layouts: the transforms run over vectors of 16 channels (channels-last),
// in registers, so they are elementwise over C. A chunk of 16 tiles keeps V
// and M as [point][tile][C] (750 KB each at C = 144); the point products are
// the register tile of register_tile.h, with the tiles as rows and the
// point's U[p] [C, C] as the panel. Bt and At hold small integers; G holds
// 1/2, 1/6 and 1/3. The weight's transform runs in double, once per call.
#pragma once

#include <cstddef>
#include <vector>

namespace mpiasr {

// Whether this process runs the Winograd convolution (forward and input
// gradient) for these channel counts: the CPU has AVX-512 (F, BW, DQ, VL) and Cin, Cout are
// multiples of 16 (the transforms take 16 channels at a time, in registers).
bool conv2d_winograd_available(int Cin, int Cout);

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
// conv2d_winograd_input_grad_weight; scratch is room for
// conv2d_winograd_strip_scratch_size floats, one per thread.
std::vector<float> conv2d_winograd_input_grad_weight(const float* weight, int Cin, int Cout);
size_t conv2d_winograd_strip_scratch_size(int Cin, int Cout);
void conv2d_winograd_input_grad_strip(float* strip, const float* dout,
                                      const float* transformed_weight, float* scratch, int B,
                                      int Cin, int H, int W, int Cout, int b, int first_line,
                                      int lines);

}  // namespace mpiasr
