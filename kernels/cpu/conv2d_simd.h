// The loops of conv2d.cpp, compiled once per instruction-set level
// (kernels/cpu/simd_levels.h): the col2im of the input gradient, and the
// direct forward and weight gradient of the single-channel first layer.

// The input gradient of a chunk, added to rows (input row 2 first_line of the
// chunk's image, the first row its patches read):
//   dcol [rows, K] = dout_chunk [rows, Cout] Wr [Cout, K], rows += col2im(dcol)
// dout is the whole output gradient; dcol is room for the chunk's.
template <typename T>
void add_chunk_input_grad(T* rows, T* dcol, const T* dout, const T* wr, const ConvShape& s,
                          const Chunk& chunk) {
  const int K = s.K();
  blas_gemm<T>(false, false, chunk.rows(s), K, s.Cout, T(1), dout + chunk.first_row(s) * s.Cout,
               s.Cout, wr, K, T(0), dcol, K);
  const int span = 3 * s.Cin;
  const T* src = dcol;
  for (int i = 0; i < chunk.lines; ++i) {
    for (int j = 0; j < s.Wo; ++j) {
      for (int kh = 0; kh < 3; ++kh, src += span) {
        T* dst = rows + (int64_t(2 * i + kh) * s.W + 2 * j) * s.Cin;
        for (int e = 0; e < span; ++e) dst[e] += src[e];
      }
    }
  }
}

// Output line i of image b for Cin = 1, directly: each pixel reads nine input
// values and writes Cout, y = bias + sum_k x_k Wt[k] (then relu(y) with
// apply_relu). K = 9 is too short for a GEMM to pay, and im2col would copy
// three values at a time.
template <typename T>
void single_channel_forward_line(T* __restrict y, const T* inp, const T* wt, const T* bias,
                                 const ConvShape& s, int b, int i, bool apply_relu) {
  const int Cout = s.Cout;
  const T *w0 = wt, *w1 = w0 + Cout, *w2 = w1 + Cout, *w3 = w2 + Cout, *w4 = w3 + Cout,
          *w5 = w4 + Cout, *w6 = w5 + Cout, *w7 = w6 + Cout, *w8 = w7 + Cout;
  for (int j = 0; j < s.Wo; ++j) {
    const T* r0 = patch_row(inp, s, b, i, j, 0);
    const T* r1 = patch_row(inp, s, b, i, j, 1);
    const T* r2 = patch_row(inp, s, b, i, j, 2);
    const T x0 = r0[0], x1 = r0[1], x2 = r0[2], x3 = r1[0], x4 = r1[1], x5 = r1[2], x6 = r2[0],
            x7 = r2[1], x8 = r2[2];
    T* pixel = y + int64_t(j) * Cout;
    for (int co = 0; co < Cout; ++co) {
      pixel[co] = bias[co] + x0 * w0[co] + x1 * w1[co] + x2 * w2[co] + x3 * w3[co] + x4 * w4[co] +
                  x5 * w5[co] + x6 * w6[co] + x7 * w7[co] + x8 * w8[co];
    }
  }
  // ReLU while the line is still in cache.
  if (apply_relu)
    for (int64_t e = 0; e < int64_t(s.Wo) * Cout; ++e) y[e] = relu(y[e]);
}

// Adds the weight and bias gradients of output rows [first_row, first_row +
// rows) of image b for Cin = 1, directly: each pixel adds x_k g[p] to row k of
// dWt [9, Cout] (k = 3 kh + kw) and g[p] to row 9, the bias sum. g holds the
// gradient of those rows, [rows, Wo, Cout]: the output's, or with relu_out
// (the layer's ReLU output, the same rows) the ReLU's output's, masked here
// pixel by pixel while it is in cache. Four pixels of a line go in at once,
// so each dWt value is loaded and stored once per four products; a line's
// last Wo % 4 pixels go one at a time.
template <typename T>
void single_channel_weight_grad_rows(T* __restrict grads, const T* g, const T* relu_out,
                                     const T* inp, const ConvShape& s, int b, int first_row,
                                     int rows) {
  constexpr int kPixels = 4;
  const int Cout = s.Cout;
  std::vector<T> masked(relu_out ? size_t(kPixels) * Cout : 0);
  // The nine inputs and the 1 (bias) of pixel j, and its gradient (masked
  // into slot `slot` of `masked` with relu_out).
  const auto pixel = [&](int i, int j, int slot, T* x) -> const T* {
    for (int kh = 0; kh < 3; ++kh) {
      const T* row = patch_row(inp, s, b, i, j, kh);
      for (int kw = 0; kw < 3; ++kw) x[3 * kh + kw] = row[kw];
    }
    x[9] = T(1);
    const T* gp = g + int64_t(j) * Cout;
    if (!relu_out) return gp;
    const T* y = relu_out + int64_t(j) * Cout;
    T* out = masked.data() + int64_t(slot) * Cout;
    for (int co = 0; co < Cout; ++co) out[co] = relu_grad(y[co], gp[co]);
    return out;
  };
  for (int i = first_row; i < first_row + rows; ++i) {
    int j = 0;
    for (; j + kPixels <= s.Wo; j += kPixels) {
      T x0[10], x1[10], x2[10], x3[10];
      const T* g0 = pixel(i, j, 0, x0);
      const T* g1 = pixel(i, j + 1, 1, x1);
      const T* g2 = pixel(i, j + 2, 2, x2);
      const T* g3 = pixel(i, j + 3, 3, x3);
      for (int k = 0; k < 10; ++k) {
        T* grad = grads + int64_t(k) * Cout;
        const T a0 = x0[k], a1 = x1[k], a2 = x2[k], a3 = x3[k];
        for (int co = 0; co < Cout; ++co)
          grad[co] += a0 * g0[co] + a1 * g1[co] + a2 * g2[co] + a3 * g3[co];
      }
    }
    for (; j < s.Wo; ++j) {
      T x[10];
      const T* gp = pixel(i, j, 0, x);
      for (int k = 0; k < 10; ++k) {
        T* grad = grads + int64_t(k) * Cout;
        for (int co = 0; co < Cout; ++co) grad[co] += x[k] * gp[co];
      }
    }
    g += int64_t(s.Wo) * Cout;
    if (relu_out) relu_out += int64_t(s.Wo) * Cout;
  }
}
