// 3x3 stride-2 Conv2d without padding on the CPU, channels-last:
//   out[b, i, j, co] = bias[co] + sum_{ci, kh, kw} W[co, ci, kh, kw] inp[b, 2i + kh, 2j + kw, ci]
//   inp [B, H, W, Cin], out [B, Ho, Wo, Cout], Ho = (H - 3) / 2 + 1, Wo = (W - 3) / 2 + 1,
//   W [Cout, Cin, 3, 3] (PyTorch's layout), bias [Cout].
//
// Method: im2col + GEMM. The weight is reordered to Wr [Cout, 3, 3, Cin] so a
// patch row of the column matrix is three contiguous copies of 3 * Cin input
// values (one per kernel row). Output rows are processed in chunks of whole
// output lines of one utterance, about 256K column-matrix elements (~10 lines
// for Cin = 144, whole images for Cin = 1); each thread builds its chunk's
// column matrix and multiplies it by Wr^T:
//   out_chunk [rows, Cout] = col [rows, 9 Cin] Wr^T
// Backward, per chunk: dWr += dout_chunk^T col, dcol = dout_chunk Wr, and dcol
// is scattered back (col2im). Neighbouring chunks share one input row, so
// even and odd chunks run in two parallel phases.
//   dinp is overwritten; dweight and dbias are accumulated; null skips.
#pragma once

namespace mpiasr {

inline int conv2d_out_size(int in) {
  return (in - 3) / 2 + 1;
}

template <typename T>
void cpu_conv2d_forward(T* out, const T* inp, const T* weight, const T* bias, int B, int Cin, int H,
                        int W, int Cout);

template <typename T>
void cpu_conv2d_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                         const T* weight, int B, int Cin, int H, int W, int Cout);

}  // namespace mpiasr
