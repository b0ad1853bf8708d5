// The 3x3 stride-2 convolution of conv2d.h (same layouts and formula),
// computed directly with AVX-512 for float, Cin > 1 and Cout a multiple of 16:
// no column matrix, no packing of the input.
//
//   out[b, i, j, co] = bias[co] + sum_{kh, kw, ci} inp[b, 2i + kh, 2j + kw, ci] W[co, ci, kh, kw]
//
// The weight is packed once per call into blocks of up to 48 output channels,
// Wp[block][kh, kw][ci][48], so that one tap of one block is a contiguous
// Cin x 48 slice (27 KB at Cin = 144) that stays in L1. Output pixels are
// taken in chunks of whole output lines of one image (8 lines: their 17 input
// rows, 380 KB at Cin = 144 and W = 39, stay in L2). For each block and tap a
// chunk's pixels go in tiles of 8 consecutive pixels: 8 x 3 accumulator
// vectors, and per input channel one broadcast of each pixel's input and
// three loads of the weight row, 24 fused multiply-adds. The accumulators
// start from the bias at the first tap, are stored between taps (in L1) and
// pass through ReLU after the last.
#pragma once

#include <vector>

namespace mpiasr {

// Whether this process runs the direct convolution for these channel counts:
// the CPU has AVX-512 (F, BW, DQ, VL) and Cin > 1, Cout % 16 == 0. Used by
// cpu_conv2d_forward<float> and, for the input gradient (Cin % 16 == 0 too),
// by cpu_subsampling_first_conv_backward<float> (conv2d.h).
bool conv2d_direct_available(int Cin, int Cout);

// out [B, Ho, Wo, Cout] = conv2d(inp [B, H, W, Cin], weight, bias) (then ReLU
// with relu); bias may be null. Needs conv2d_direct_available(Cin, Cout).
void conv2d_direct_forward(float* out, const float* inp, const float* weight, const float* bias,
                           int B, int Cin, int H, int W, int Cout, bool relu);

// The input gradient of the convolution, by strips (Cin a multiple of 16
// too). Output lines [first_line, first_line + lines) of image b reach input
// rows [2 first_line, 2 first_line + 2 lines + 1); their part of those rows'
// gradient is written to strip [2 lines + 1, W, Cin]:
//   strip[r, x, ci] = sum dout[b, i, j, co] W[co, ci, kh, kw]
//                     over 2 (i - first_line) + kh = r, 2 j + kw = x,
//                     first_line <= i < first_line + lines, co
// Where two strips share a row, each holds its own part. The strip is zeroed;
// then for each block of 48 input channels and each tap, output pixel (i, j)
// adds dout[b, i, j, :] times the tap's weight to strip pixel
// (2 (i - first_line) + kh, 2 j + kw): the forward's tiles, with pixels of the
// output gradient for input pixels. packed_weight comes from
// conv2d_direct_pack_input_grad_weight: blocks of 48 input channels,
// Wq[block][kh, kw][co][48].
std::vector<float> conv2d_direct_pack_input_grad_weight(const float* weight, int Cin, int Cout);
void conv2d_direct_input_grad_strip(float* strip, const float* dout, const float* packed_weight,
                                    int B, int Cin, int H, int W, int Cout, int b, int first_line,
                                    int lines);

}  // namespace mpiasr
