// The loops of conv2d_winograd.cpp, compiled once per instruction-set level
// (kernels/cpu/simd_levels.h): the transforms, the register tile of the
// point products, and one chunk of tiles of the forward pass, the input
// gradient and the weight gradient. A Vec is one register of the level: 16
// floats (AVX-512), 8 (AVX2) or 4 (baseline x86-64, SSE); the channels, a
// multiple of 16, are a whole number of Vecs at every level. (A Vec of 16
// floats built for AVX2 was kept in memory, not in pairs of registers.)
constexpr int kLanes = kSimdLevel == SimdLevel::kAvx512 ? 16
                       : kSimdLevel == SimdLevel::kAvx2 ? 8
                                                        : 4;
typedef float Vec __attribute__((vector_size(kLanes * sizeof(float))));

// The register tile: kTileRows x kTileVectors Vecs of accumulators, with
// registers left for a row of weights and a broadcast. AVX-512 (32
// registers): 8 x 3, 24 accumulators. AVX2 (16 registers): 6 x 2, 12
// accumulators, the shape of OpenBLAS's Haswell sgemm kernel. SSE (16
// registers): 4 x 2, 8 accumulators.
constexpr int kTileRows = kSimdLevel == SimdLevel::kAvx512 ? 8
                          : kSimdLevel == SimdLevel::kAvx2 ? 6
                                                           : 4;
constexpr int kTileVectors = kSimdLevel == SimdLevel::kAvx512 ? 3 : 2;
constexpr int kBlockChannels = kTileVectors * kLanes;

inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof(Vec));
  return v;
}

inline void store(float* p, const Vec& v) {
  std::memcpy(p, &v, sizeof(Vec));
}

// For NP rows (1..kTileRows) and NV Vecs of columns (1..kTileVectors):
//   out[p][v] = sum_k x[p][k x_step] w[k w_step + v]   (+= with add)
// x[p] and out[p] point at row p's operand and result (rows anywhere in
// memory; x_step floats between a row's operands); row k of w holds NV
// contiguous vectors, w_step floats after row k - 1. The NP x NV
// accumulators stay in registers over k: per k, NV loads of w, NP
// broadcasts of x, NP * NV multiply-adds.
template <int NP, int NV>
inline void tile_multiply(float* const* out, const float* const* x, int x_step, const float* w,
                          int w_step, int K, bool add) {
  Vec acc[NP][NV] = {};
  if (add) {
    for (int p = 0; p < NP; ++p)
      for (int v = 0; v < NV; ++v) acc[p][v] = load(out[p] + v * kLanes);
  }
  for (int k = 0, xk = 0; k < K; ++k, xk += x_step, w += w_step) {
    Vec wv[NV];
    for (int v = 0; v < NV; ++v) wv[v] = load(w + v * kLanes);
#pragma GCC unroll 8
    for (int p = 0; p < NP; ++p) {
      const float xv = x[p][xk];
      for (int v = 0; v < NV; ++v) acc[p][v] += xv * wv[v];
    }
  }
  for (int p = 0; p < NP; ++p)
    for (int v = 0; v < NV; ++v) store(out[p] + v * kLanes, acc[p][v]);
}

template <int NV, int... N>
inline void tile_multiply_rows(int rows, float* const* out, const float* const* x, int x_step,
                               const float* w, int w_step, int K, bool add,
                               std::integer_sequence<int, N...>) {
  ((rows == N + 1 ? (tile_multiply<N + 1, NV>(out, x, x_step, w, w_step, K, add), true) : false) ||
   ...);
}

template <int... V>
inline void tile_multiply_columns(int rows, int columns, float* const* out, const float* const* x,
                                  int x_step, const float* w, int w_step, int K, bool add,
                                  std::integer_sequence<int, V...>) {
  constexpr auto row_counts = std::make_integer_sequence<int, kTileRows>();
  ((columns == (V + 1) * kLanes
        ? (tile_multiply_rows<V + 1>(rows, out, x, x_step, w, w_step, K, add, row_counts), true)
        : false) ||
   ...);
}

// The tile for `rows` (1..kTileRows) rows and `columns` (kLanes ..
// kBlockChannels, a multiple of kLanes) columns.
inline void tile_multiply(int rows, int columns, float* const* out, const float* const* x,
                          int x_step, const float* w, int w_step, int K, bool add) {
  tile_multiply_columns(rows, columns, out, x, x_step, w, w_step, K, add,
                        std::make_integer_sequence<int, kTileVectors>());
}

int block_width(int channels, int c0) {
  return std::min(kBlockChannels, channels - c0);
}

// The width of the panels of U (transform_weight) at this level.
int block_channels() {
  return kBlockChannels;
}

// y = T x, for Vecs of channels; unrolled, so that the coefficients
// are constants and the zero ones cost nothing.
template <int R, int S>
inline void times(Vec (&y)[R], const float (&T)[R][S], const Vec (&x)[S]) {
#pragma GCC unroll 9
  for (int r = 0; r < R; ++r) {
    Vec sum = {};
#pragma GCC unroll 9
    for (int s = 0; s < S; ++s)
      if (T[r][s] != 0.0f) sum += T[r][s] * x[s];
    y[r] = sum;
  }
}

// y = T^T x, the same way.
template <int R, int S>
inline void times_transposed(Vec (&y)[S], const float (&T)[R][S], const Vec (&x)[R]) {
#pragma GCC unroll 9
  for (int s = 0; s < S; ++s) {
    Vec sum = {};
#pragma GCC unroll 9
    for (int r = 0; r < R; ++r)
      if (T[r][s] != 0.0f) sum += T[r][s] * x[r];
    y[s] = sum;
  }
}

// V[p] (at v + p point_stride) = Bt X Bt^T for the S x S input pixels of the
// tile whose first output pixel is (row, col) of image `image` [H, W, C],
// for Bt [P][S]; pixels outside the image read `zeros`. A Vec of channels
// at a time, in registers.
template <int P, int S>
void input_transform(const float (&Bt)[P][S], float* v, int64_t point_stride, const float* image,
                     int H, int W, int C, int row, int col, const float* zeros) {
  const int r0 = 2 * row, c0 = 2 * col;
  const float* pixel[S][S];
  for (int su = 0; su < S; ++su)
    for (int sv = 0; sv < S; ++sv)
      pixel[su][sv] =
          r0 + su < H && c0 + sv < W ? image + ((int64_t(r0) + su) * W + c0 + sv) * C : zeros;
  for (int c = 0; c < C; c += kLanes) {
    Vec rows[S][P];  // X Bt^T
    for (int su = 0; su < S; ++su) {
      Vec x[S];
      for (int sv = 0; sv < S; ++sv) x[sv] = load(pixel[su][sv] + c);
      times(rows[su], Bt, x);
    }
    for (int pv = 0; pv < P; ++pv) {
      Vec column[S], out[P];
      for (int su = 0; su < S; ++su) column[su] = rows[su][pv];
      times(out, Bt, column);
      for (int pu = 0; pu < P; ++pu) store(v + (pu * P + pv) * point_stride + c, out[pu]);
    }
  }
}

// dM[p] (at dm + p point_stride) = At^T dY At for the tile whose first output
// pixel is (row, col), for At [O][P]: dY's pixel (a, b) is at dout_image
// [Ho, Wo, C] (row + a, col + b) for a < rows, b < cols, and `zeros`
// elsewhere.
template <int O, int P>
void output_grad_transform(const float (&At)[O][P], float* dm, int64_t point_stride,
                           const float* dout_image, int Wo, int C, int row, int col, int rows,
                           int cols, const float* zeros) {
  const float* pixel[O][O];
  for (int a = 0; a < O; ++a)
    for (int b = 0; b < O; ++b)
      pixel[a][b] =
          a < rows && b < cols ? dout_image + ((int64_t(row) + a) * Wo + col + b) * C : zeros;
  for (int c = 0; c < C; c += kLanes) {
    Vec rows_at[O][P];  // dY At
    for (int a = 0; a < O; ++a) {
      Vec d[O];
      for (int b = 0; b < O; ++b) d[b] = load(pixel[a][b] + c);
      times_transposed(rows_at[a], At, d);
    }
    for (int pv = 0; pv < P; ++pv) {
      Vec column[O], out[P];
      for (int a = 0; a < O; ++a) column[a] = rows_at[a][pv];
      times_transposed(out, At, column);
      for (int pu = 0; pu < P; ++pu) store(dm + (pu * P + pv) * point_stride + c, out[pu]);
    }
  }
}

// The tile's output pixels (row + a, col + b) inside out_image [Ho, Wo, C]:
// Y = bias + At M At^T (then ReLU with relu), M[p] at m + p point_stride.
void output_transform(float* out_image, int Ho, int Wo, int C, int row, int col, const float* m,
                      int64_t point_stride, const float* bias, bool relu) {
  const int rows = std::min(kOut, Ho - row), cols = std::min(kOut, Wo - col);
  const Vec zero = {};
  for (int c = 0; c < C; c += kLanes) {
    Vec rows_at[kAxisPoints][kOut];  // M At^T
    for (int pu = 0; pu < kAxisPoints; ++pu) {
      Vec points[kAxisPoints];
      for (int pv = 0; pv < kAxisPoints; ++pv)
        points[pv] = load(m + (pu * kAxisPoints + pv) * point_stride + c);
      times(rows_at[pu], kOutputTransform, points);
    }
    const Vec bias_c = load(bias + c);
    for (int b = 0; b < cols; ++b) {
      Vec column[kAxisPoints], y[kOut];
      for (int pu = 0; pu < kAxisPoints; ++pu) column[pu] = rows_at[pu][b];
      times(y, kOutputTransform, column);
      for (int a = 0; a < rows; ++a) {
        const Vec out = y[a] + bias_c;
        store(out_image + ((int64_t(row) + a) * Wo + col + b) * C + c,
              relu ? (out > zero ? out : zero) : out);
      }
    }
  }
}

// strip [strip_rows, W, C] += Bt^T dV Bt at the tile's input pixels (2 row
// + su, 2 col + sv) (row counted in the strip), for those inside the strip;
// dV[p] at dv + p point_stride.
void input_grad_transform(float* strip, int strip_rows, int W, int C, int row, int col,
                          const float* dv, int64_t point_stride) {
  const int r0 = 2 * row, c0 = 2 * col;
  const int rows = std::min(kSpan, strip_rows - r0), cols = std::min(kSpan, W - c0);
  for (int c = 0; c < C; c += kLanes) {
    Vec rows_bt[kAxisPoints][kSpan];  // dV Bt
    for (int pu = 0; pu < kAxisPoints; ++pu) {
      Vec points[kAxisPoints];
      for (int pv = 0; pv < kAxisPoints; ++pv)
        points[pv] = load(dv + (pu * kAxisPoints + pv) * point_stride + c);
      times_transposed(rows_bt[pu], kInputTransform, points);
    }
    for (int sv = 0; sv < cols; ++sv) {
      Vec column[kAxisPoints], x[kSpan];
      for (int pu = 0; pu < kAxisPoints; ++pu) column[pu] = rows_bt[pu][sv];
      times_transposed(x, kInputTransform, column);
      for (int su = 0; su < rows; ++su) {
        float* pixel = strip + ((int64_t(r0) + su) * W + c0 + sv) * C + c;
        store(pixel, load(pixel) + x[su]);
      }
    }
  }
}

// For each point p: out[p][t, :] = in[p][t, :] u[p] for the n tiles of a
// chunk, in[p] [tiles, K] and out[p] [tiles, N] at point strides of
// chunk_tiles rows, u[p] [K, N] in panels of kBlockChannels columns
// (transform_weight); N a multiple of kLanes.
void point_products(float* out, const float* in, const float* u, int n, int chunk_tiles, int K,
                    int N) {
  for (int p = 0; p < kPoints; ++p) {
    const float* up = u + int64_t(p) * K * N;
    for (int c0 = 0; c0 < N; c0 += kBlockChannels) {
      const int width = block_width(N, c0);
      for (int t0 = 0; t0 < n; t0 += kTileRows) {
        const int rows = std::min(kTileRows, n - t0);
        float* o[kTileRows];
        const float* x[kTileRows];
        for (int r = 0; r < rows; ++r) {
          o[r] = out + (int64_t(p) * chunk_tiles + t0 + r) * N + c0;
          x[r] = in + (int64_t(p) * chunk_tiles + t0 + r) * K;
        }
        tile_multiply(rows, width, o, x, 1, up + int64_t(c0) * K, width, K, false);
      }
    }
  }
}

// dw [tap][Cin][Cout] += G^T dU G for one chunk of the weight gradient's n
// tiles, dU[p] [Cin, Cout] = V[p]^T dM[q] (V[p] [tiles, Cin] at v + p
// chunk_tiles Cin, dM[q] [tiles, Cout] at dm + q chunk_tiles Cout, q the
// output point that p meets): each kTileRows x kBlockChannels block of dU[p]
// is summed into the taps point p reaches.
void weight_grad_products(float* dw, const float* v, const float* dm, int n, int chunk_tiles,
                          int Cin, int Cout) {
  float block[kTileRows][kBlockChannels];
  float* o[kTileRows];
  for (int r = 0; r < kTileRows; ++r) o[r] = block[r];
  for (int p = 0; p < kGradPoints; ++p) {
    int taps[4], tap_count = 0;
    for (int kh = 0; kh < 3; ++kh)
      for (int kw = 0; kw < 3; ++kw)
        if (kGradWeightTransform[p / kGradAxisPoints][kh] &&
            kGradWeightTransform[p % kGradAxisPoints][kw])
          taps[tap_count++] = kh * 3 + kw;
    const float* vp = v + int64_t(p) * chunk_tiles * Cin;
    const int q = kGradOutputPoint[p / kGradAxisPoints] * kGradOutputAxisPoints +
                  kGradOutputPoint[p % kGradAxisPoints];
    const float* dmp = dm + int64_t(q) * chunk_tiles * Cout;
    for (int ci0 = 0; ci0 < Cin; ci0 += kTileRows) {
      const int rows = std::min(kTileRows, Cin - ci0);
      const float* x[kTileRows];
      for (int r = 0; r < rows; ++r) x[r] = vp + ci0 + r;
      for (int co0 = 0; co0 < Cout; co0 += kBlockChannels) {
        const int width = block_width(Cout, co0);
        if (tap_count == 1) {  // straight into the tap
          float* d[kTileRows];
          for (int r = 0; r < rows; ++r)
            d[r] = dw + (int64_t(taps[0]) * Cin + ci0 + r) * Cout + co0;
          tile_multiply(rows, width, d, x, Cin, dmp + co0, Cout, n, true);
          continue;
        }
        tile_multiply(rows, width, o, x, Cin, dmp + co0, Cout, n, false);
        for (int k = 0; k < tap_count; ++k) {
          for (int r = 0; r < rows; ++r) {
            float* d = dw + (int64_t(taps[k]) * Cin + ci0 + r) * Cout + co0;
            for (int c = 0; c < width; c += kLanes) store(d + c, load(d + c) + load(block[r] + c));
          }
        }
      }
    }
  }
}

// The forward pass of the chunk of n tiles from tile t0: V and M are the
// chunk's scratch ([point][kChunkTiles][Cin], [point][kChunkTiles][Cout]).
void forward_chunk(float* out, const float* inp, const float* u, const float* bias, const Shape& s,
                   int64_t t0, int n, float* v, float* m, const float* zeros, bool relu) {
  for (int t = 0; t < n; ++t) {
    const Tile tile = tile_at(t0 + t, s.tile_rows, s.tile_cols, kOut);
    input_transform(kInputTransform, v + int64_t(t) * s.Cin, int64_t(kChunkTiles) * s.Cin,
                    inp + int64_t(tile.b) * s.H * s.W * s.Cin, s.H, s.W, s.Cin, tile.row, tile.col,
                    zeros);
  }
  point_products(m, v, u, n, kChunkTiles, s.Cin, s.Cout);
  for (int t = 0; t < n; ++t) {
    const Tile tile = tile_at(t0 + t, s.tile_rows, s.tile_cols, kOut);
    output_transform(out + int64_t(tile.b) * s.Ho * s.Wo * s.Cout, s.Ho, s.Wo, s.Cout, tile.row,
                     tile.col, m + int64_t(t) * s.Cout, int64_t(kChunkTiles) * s.Cout, bias, relu);
  }
}

// The input gradient of the chunk of n tiles from tile t0 of a strip of
// `lines` output lines from first_line of the image dout_image [Ho, Wo,
// Cout], added into strip [strip_rows, W, Cin]; dM and dV are the chunk's
// scratch.
void input_grad_chunk(float* strip, int strip_rows, const float* dout_image,
                      const float* transformed_weight, const Shape& s, int first_line, int lines,
                      int t0, int n, float* dm, float* dv, const float* zeros) {
  // Tile t0 + t: strip-relative first output line and first column.
  const auto line_of = [&](int t) { return (t0 + t) / s.tile_cols * kOut; };
  const auto col_of = [&](int t) { return (t0 + t) % s.tile_cols * kOut; };
  for (int t = 0; t < n; ++t) {
    output_grad_transform(kOutputTransform, dm + int64_t(t) * s.Cout, int64_t(kChunkTiles) * s.Cout,
                          dout_image, s.Wo, s.Cout, first_line + line_of(t), col_of(t),
                          std::min(kOut, lines - line_of(t)), std::min(kOut, s.Wo - col_of(t)),
                          zeros);
  }
  point_products(dv, dm, transformed_weight, n, kChunkTiles, s.Cout, s.Cin);
  for (int t = 0; t < n; ++t) {
    input_grad_transform(strip, strip_rows, s.W, s.Cin, line_of(t), col_of(t),
                         dv + int64_t(t) * s.Cin, int64_t(kChunkTiles) * s.Cin);
  }
}

// The weight gradient of the chunk of n tiles (of 2 x 2 output pixels,
// tile_rows x tile_cols to an image) from tile t0, added into dw [tap][Cin]
// [Cout]; V and dM are the chunk's scratch.
void weight_grad_chunk(float* dw, const float* inp, const float* dout, const Shape& s,
                       int tile_rows, int tile_cols, int64_t t0, int n, float* v, float* dm,
                       const float* zeros) {
  for (int t = 0; t < n; ++t) {
    const Tile tile = tile_at(t0 + t, tile_rows, tile_cols, kGradOut);
    input_transform(kGradInputTransform, v + int64_t(t) * s.Cin, int64_t(kGradChunkTiles) * s.Cin,
                    inp + int64_t(tile.b) * s.H * s.W * s.Cin, s.H, s.W, s.Cin, tile.row, tile.col,
                    zeros);
    output_grad_transform(
        kGradOutputTransform, dm + int64_t(t) * s.Cout, int64_t(kGradChunkTiles) * s.Cout,
        dout + int64_t(tile.b) * s.Ho * s.Wo * s.Cout, s.Wo, s.Cout, tile.row, tile.col,
        std::min(kGradOut, s.Ho - tile.row), std::min(kGradOut, s.Wo - tile.col), zeros);
  }
  weight_grad_products(dw, v, dm, n, kGradChunkTiles, s.Cin, s.Cout);
}
