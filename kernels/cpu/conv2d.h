// 3x3 stride-2 Conv2d without padding on the CPU, channels-last:
//   out[b, i, j, co] = bias[co] + sum_{ci, kh, kw} W[co, ci, kh, kw] inp[b, 2i + kh, 2j + kw, ci]
//   inp [B, H, W, Cin], out [B, Ho, Wo, Cout], Ho = (H - 3) / 2 + 1, Wo = (W - 3) / 2 + 1,
//   W [Cout, Cin, 3, 3] (PyTorch's layout), bias [Cout].
//
// Method: im2col + GEMM. The weight is reordered to Wr [Cout, 3, 3, Cin] so a
// patch row of the column matrix is three contiguous copies of 3 * Cin input
// values (one per kernel row). Output rows are processed in chunks of whole
// output lines of one utterance, about 256K column-matrix elements (~10 lines
// for Cin = 144); each thread builds its chunk's column matrix and multiplies
// it by Wr^T, then adds bias and applies ReLU while the chunk is in cache:
//   out_chunk [rows, Cout] = col [rows, 9 Cin] Wr^T + bias
// Backward, per chunk: dWr += dout_chunk^T col, dcol = dout_chunk Wr, and dcol
// is scattered back (col2im). Neighbouring chunks share one input row, so
// even and odd chunks run in two parallel phases.
//
// For float at the avx2 and avx512 levels (kernels/cpu/simd.h) with whole
// vectors of channels (multiples of 16), the forward and the subsampling's
// fused input gradient run the Winograd transform of conv2d_winograd.h
// instead, with 0.6 of the multiplies; the fused input gradient's chunks
// are then 32 output lines, eight rows of its tiles. At the avx512 level the
// weight gradient runs its 2 x 2 tiles too, with 0.74 of the multiplies
// (conv2d_winograd_weight_grad_chosen).
//
// One input channel (the first layer) is computed directly instead: with
// K = 9 a GEMM does not pay and the layer is bound by memory (its output is
// Cout times its input). Forward writes each output pixel once from its nine
// inputs; backward reads dout once, summing each image's weight and bias
// gradients into its own slot, then the slots in image order (so the result
// does not depend on the thread count).
//   dinp is overwritten; dweight and dbias are accumulated; null skips.
#pragma once

#include <cstdint>

namespace mpiasr {

inline int conv2d_out_size(int in) {
  return (in - 3) / 2 + 1;
}

template <typename T>
void cpu_conv2d_forward(T* out, const T* inp, const T* weight, const T* bias, int B, int Cin, int H,
                        int W, int Cout, bool relu);

template <typename T>
void cpu_conv2d_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                         const T* weight, int B, int Cin, int H, int W, int Cout);

// The first subsampling convolution's weight and bias gradients through the
// second convolution and the ReLU between them, for
//   a1 = relu(conv2d(x, W0, b0)), x [B, H, W, 1], a1 [B, H1, W1, C],
//   a2 = conv2d(a1, W2, .) [B, H2, W2, C] with output gradient dout2:
//   da1 = [a1 > 0] conv2d_backward_input(dout2, W2)
//   dweight0 += the weight gradient of da1 over x; dbias0 += sum da1.
// da1 (as large as a1, Cout times the input) is never stored: each chunk of
// the second convolution's output lines scatters its input gradient into the
// strip of a1 rows it reads and adds the strip's contribution, masked by the
// ReLU as it is read, to the first layer's gradients in a slot of its own;
// the slots are summed in order (the same result on any thread count). Rows
// shared by two chunks receive each chunk's part separately, which sums to
// the same.
template <typename T>
void cpu_subsampling_first_conv_backward(T* dweight0, T* dbias0, const T* dout2, const T* a1,
                                         const T* x, const T* weight2, int B, int H, int W, int C);

// The multiply-adds of the matrix products that the float functions above
// run in this process for a convolution of these sizes: the forward, the
// input gradient (the subsampling's fused input side, for the second
// convolution) and the weight gradient. The direct convolution's B Ho Wo 9
// Cin Cout each, or the Winograd transform's fewer where it runs
// (conv2d_winograd.h); for the benchmarks' FLOP counts.
struct Conv2dMultiplyAdds {
  int64_t forward, input_grad, weight_grad;
};
Conv2dMultiplyAdds cpu_conv2d_float_multiply_adds(int B, int Cin, int H, int W, int Cout);

}  // namespace mpiasr
