// Strided Winograd convolution, 4 x 4 output tiles (see conv2d_winograd.h).
#include "kernels/cpu/conv2d_winograd.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/register_tile.h"
#include "kernels/cpu/simd.h"
#include "src/base/error.h"

namespace mpiasr {

namespace {

// The tiles' geometry, which the kernels below and the counts of
// conv2d_winograd_*_multiply_adds share.
// Along one axis: output pixels of a tile, input pixels it reads, points.
constexpr int kOut = kConv2dWinogradTileLines;
constexpr int kSpan = 2 * kOut + 1;
constexpr int kAxisPoints = 2 * kOut + 1;
constexpr int kPoints = kAxisPoints * kAxisPoints;

// The weight gradient's 2 x 2 output tiles (5 x 5 input pixels, 25 points).
constexpr int kGradOut = 2;
constexpr int kGradSpan = 2 * kGradOut + 1;
constexpr int kGradAxisPoints = 2 * kGradOut + 1;
constexpr int kGradPoints = kGradAxisPoints * kGradAxisPoints;

// Tiles of `out` pixels along an axis of `pixels` output pixels, the last
// one cut by the edge.
int tiles_along(int pixels, int out) {
  return (pixels + out - 1) / out;
}

}  // namespace

#if MPIASR_REGISTER_TILE

namespace {

constexpr int kLanes = register_tile::kLanes;
constexpr int kBlockChannels = register_tile::kPanelColumns;
constexpr int kTileRows = register_tile::kMaxRows;

// Bt [point][input pixel]: points 0-4 are F(4, 2) of the even inputs x0, x2,
// x4, x6, x8 at 0, 1, -1, 2 and infinity (rows scaled to integers, the
// scale moved into G); points 5-8 are the odd inputs x1, x3, x5, x7.
constexpr float kInputTransform[kAxisPoints][kSpan] = {
    {2, 0, -1, 0, -2, 0, 1, 0, 0}, {0, 0, 2, 0, 1, 0, -1, 0, 0},  {0, 0, -2, 0, 3, 0, -1, 0, 0},
    {0, 0, -1, 0, 0, 0, 1, 0, 0},  {0, 0, 2, 0, -1, 0, -2, 0, 1}, {0, 1, 0, 0, 0, 0, 0, 0, 0},
    {0, 0, 0, 1, 0, 0, 0, 0, 0},   {0, 0, 0, 0, 0, 1, 0, 0, 0},   {0, 0, 0, 0, 0, 0, 0, 1, 0}};
// G [point][tap]
constexpr double kWeightTransform[kAxisPoints][3] = {{1.0 / 2, 0, 0},
                                                     {1.0 / 2, 0, 1.0 / 2},
                                                     {1.0 / 6, 0, -1.0 / 6},
                                                     {1.0 / 6, 0, 1.0 / 3},
                                                     {0, 0, 1},
                                                     {0, 1, 0},
                                                     {0, 1, 0},
                                                     {0, 1, 0},
                                                     {0, 1, 0}};
// At [output pixel][point]
constexpr float kOutputTransform[kOut][kAxisPoints] = {{1, 1, 1, 1, 0, 1, 0, 0, 0},
                                                       {0, 1, -1, 2, 0, 0, 1, 0, 0},
                                                       {0, 1, 1, 4, 0, 0, 0, 1, 0},
                                                       {0, 1, -1, 8, 1, 0, 0, 0, 1}};

// Tiles per chunk: V and M of a chunk are 81 x 64 x 144 floats each at
// C = 144 (3 MB). Every chunk reads all of U (81 x 144 x 144 floats,
// 6.7 MB, more than a core's L2) once, so the chunk sets how often U comes
// from L3: on a Xeon (2 vCPUs, 2 MB of L2 a core), 64 tiles against 16 took
// the forward from 117 to 96 ms and the subsampling's fused input side (a
// strip of 32 lines is 40 tiles at `small`'s width) from 159 to 118 ms
// (medians of 6 alternations, 1 thread); on an AMD EPYC, 32 and 64 were no
// faster than 16.
constexpr int kChunkTiles = 64;

// Bt [point][input pixel]: points 0-2 are F(2, 2) of the even inputs x0, x2,
// x4 (x0 - x2, x2, x4 - x2), points 3-4 the odd inputs x1, x3.
constexpr float kGradInputTransform[kGradAxisPoints][kGradSpan] = {
    {1, 0, -1, 0, 0}, {0, 0, 1, 0, 0}, {0, 0, -1, 0, 1}, {0, 1, 0, 0, 0}, {0, 0, 0, 1, 0}};
// The output gradient's points: At^T dY At for At [output pixel][point]
// takes only 3 distinct values along an axis (dy0, dy0 + dy1, dy1), so dM
// keeps those 9; kGradOutputPoint says which of them each input point meets.
constexpr int kGradOutputAxisPoints = 3;
constexpr int kGradOutputPoints = kGradOutputAxisPoints * kGradOutputAxisPoints;
constexpr float kGradOutputTransform[kGradOut][kGradOutputAxisPoints] = {{1, 1, 0}, {0, 1, 1}};
constexpr int kGradOutputPoint[kGradAxisPoints] = {0, 1, 2, 0, 2};
// G [point][tap]: the taps each point's product reaches (all ones).
constexpr bool kGradWeightTransform[kGradAxisPoints][3] = {{true, false, false},
                                                           {true, false, true},
                                                           {false, false, true},
                                                           {false, true, false},
                                                           {false, true, false}};

// Tiles per chunk of the weight gradient: V is 25 x 64 x 144 floats at
// C = 144 (920 KB), dM 9 x 64 x 144 (330 KB).
constexpr int kGradChunkTiles = 64;

struct Shape {
  int B, Cin, H, W, Cout, Ho, Wo, tile_rows, tile_cols;
  int64_t tiles() const { return int64_t(B) * tile_rows * tile_cols; }
  int64_t multiply_adds() const { return int64_t(B) * Ho * Wo * 9 * Cin * Cout; }
};

Shape make_shape(int B, int Cin, int H, int W, int Cout) {
  MPIASR_CHECK(conv2d_winograd_available(Cin, Cout),
               "Winograd conv2d needs AVX-512 and Cin, Cout multiples of 16: Cin="
                   << Cin << " Cout=" << Cout);
  MPIASR_CHECK(B >= 0 && H >= 3 && W >= 3,
               "conv2d needs at least a 3x3 input: B=" << B << " H=" << H << " W=" << W);
  const int Ho = conv2d_out_size(H), Wo = conv2d_out_size(W);
  return {B, Cin, H, W, Cout, Ho, Wo, tiles_along(Ho, kOut), tiles_along(Wo, kOut)};
}

// Tile t of the whole batch, in image, tile-row, tile-column order, for
// tiles of `out` x `out` output pixels, tile_rows x tile_cols to an image.
struct Tile {
  int b, row, col;  // image; first output line and column
};

Tile tile_at(int64_t t, int tile_rows, int tile_cols, int out) {
  const int64_t per_image = int64_t(tile_rows) * tile_cols;
  const int within = int(t % per_image);
  return {int(t / per_image), within / tile_cols * out, within % tile_cols * out};
}

int block_width(int channels, int c0) {
  return std::min(kBlockChannels, channels - c0);
}

// U [point][Cin][Cout] = G W G^T (transposed: [point][Cout][Cin]), in double,
// a row of U at a time: the row's 81 points go to a buffer first and then to
// U as 81 runs of `columns` floats: 1.4-2.2 ms a call at C = 144, against
// 5.7-5.9 with 81 scattered stores per weight (and the rows in parallel
// were no faster on 2 threads).
std::vector<float> transform_weight(const float* weight, int Cin, int Cout, bool transposed) {
  std::vector<float> u(size_t(kPoints) * Cin * Cout);
  const int rows = transposed ? Cout : Cin, columns = transposed ? Cin : Cout;
  std::vector<double> row_points(size_t(kPoints) * columns);
  for (int row = 0; row < rows; ++row) {
    for (int column = 0; column < columns; ++column) {
      const int ci = transposed ? column : row, co = transposed ? row : column;
      const float* w = weight + (int64_t(co) * Cin + ci) * 9;
      double gw[kAxisPoints][3];  // G W: [point u][kw]
      for (int pu = 0; pu < kAxisPoints; ++pu)
        for (int kw = 0; kw < 3; ++kw)
          gw[pu][kw] = kWeightTransform[pu][0] * w[kw] + kWeightTransform[pu][1] * w[3 + kw] +
                       kWeightTransform[pu][2] * w[6 + kw];
      for (int pu = 0; pu < kAxisPoints; ++pu) {
        for (int pv = 0; pv < kAxisPoints; ++pv) {
          row_points[size_t(pu * kAxisPoints + pv) * columns + column] =
              gw[pu][0] * kWeightTransform[pv][0] + gw[pu][1] * kWeightTransform[pv][1] +
              gw[pu][2] * kWeightTransform[pv][2];
        }
      }
    }
    for (int p = 0; p < kPoints; ++p) {
      float* u_row = u.data() + (int64_t(p) * rows + row) * columns;
      for (int column = 0; column < columns; ++column)
        u_row[column] = float(row_points[size_t(p) * columns + column]);
    }
  }
  return u;
}

// From here to MPIASR_AVX512_END: built for AVX-512, run only where
// conv2d_winograd_available says the kernels run at the avx512 level.
MPIASR_AVX512_BEGIN

typedef register_tile::Vec Vec;

inline Vec load(const float* p) {
  Vec v;
  std::memcpy(&v, p, sizeof(Vec));
  return v;
}

inline void store(float* p, const Vec& v) {
  std::memcpy(p, &v, sizeof(Vec));
}

// y = T x, for vectors of 16 channels; unrolled, so that the coefficients
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
// for Bt [P][S]; pixels outside the image read `zeros`. 16 channels at a
// time, in registers.
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
// chunk_tiles rows, u[p] [K, N]; N a multiple of 16.
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
        register_tile::multiply(rows, width, o, x, 1, up + c0, N, K, false);
      }
    }
  }
}

// dw [tap][Cin][Cout] += G^T dU G for one chunk of the weight gradient's n
// tiles, dU[p] [Cin, Cout] = V[p]^T dM[q] (V[p] [tiles, Cin] at v + p
// chunk_tiles Cin, dM[q] [tiles, Cout] at dm + q chunk_tiles Cout, q the
// output point that p meets): each 8 x 48 block of dU[p] is summed into
// the taps point p reaches.
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
      const float* x[kTileRows];
      for (int r = 0; r < kTileRows; ++r) x[r] = vp + ci0 + r;
      for (int co0 = 0; co0 < Cout; co0 += kBlockChannels) {
        const int width = block_width(Cout, co0);
        if (tap_count == 1) {  // straight into the tap
          float* d[kTileRows];
          for (int r = 0; r < kTileRows; ++r)
            d[r] = dw + (int64_t(taps[0]) * Cin + ci0 + r) * Cout + co0;
          register_tile::multiply(kTileRows, width, d, x, Cin, dmp + co0, Cout, n, true);
          continue;
        }
        register_tile::multiply(kTileRows, width, o, x, Cin, dmp + co0, Cout, n, false);
        for (int k = 0; k < tap_count; ++k) {
          for (int r = 0; r < kTileRows; ++r) {
            float* d = dw + (int64_t(taps[k]) * Cin + ci0 + r) * Cout + co0;
            for (int c = 0; c < width; c += kLanes) store(d + c, load(d + c) + load(block[r] + c));
          }
        }
      }
    }
  }
}

MPIASR_AVX512_END

}  // namespace

bool conv2d_winograd_available(int Cin, int Cout) {
  return simd_level() == SimdLevel::kAvx512 && Cin % kLanes == 0 && Cout % kLanes == 0;
}

void conv2d_winograd_forward(float* out, const float* inp, const float* weight, const float* bias,
                             int B, int Cin, int H, int W, int Cout, bool relu) {
  const Shape s = make_shape(B, Cin, H, W, Cout);
  const std::vector<float> u = transform_weight(weight, Cin, Cout, false);
  const std::vector<float> bias_or_zero =
      bias ? std::vector<float>(bias, bias + Cout) : std::vector<float>(Cout);
  const int64_t chunks = (s.tiles() + kChunkTiles - 1) / kChunkTiles;
#pragma omp parallel if (s.multiply_adds() >= kParallelMinMultiplyAdds)
  {
    const int C = std::max(Cin, Cout);
    std::vector<float> v(size_t(kPoints) * kChunkTiles * Cin),
        m(size_t(kPoints) * kChunkTiles * Cout), zeros(C, 0.0f);
#pragma omp for schedule(static)
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      const int64_t t0 = chunk * kChunkTiles;
      const int n = int(std::min<int64_t>(kChunkTiles, s.tiles() - t0));
      for (int t = 0; t < n; ++t) {
        const Tile tile = tile_at(t0 + t, s.tile_rows, s.tile_cols, kOut);
        input_transform(kInputTransform, v.data() + int64_t(t) * Cin, int64_t(kChunkTiles) * Cin,
                        inp + int64_t(tile.b) * H * W * Cin, H, W, Cin, tile.row, tile.col,
                        zeros.data());
      }
      point_products(m.data(), v.data(), u.data(), n, kChunkTiles, Cin, Cout);
      for (int t = 0; t < n; ++t) {
        const Tile tile = tile_at(t0 + t, s.tile_rows, s.tile_cols, kOut);
        output_transform(out + int64_t(tile.b) * s.Ho * s.Wo * Cout, s.Ho, s.Wo, Cout, tile.row,
                         tile.col, m.data() + int64_t(t) * Cout, int64_t(kChunkTiles) * Cout,
                         bias_or_zero.data(), relu);
      }
    }
  }
}

std::vector<float> conv2d_winograd_input_grad_weight(const float* weight, int Cin, int Cout) {
  make_shape(1, Cin, 3, 3, Cout);  // checks the channels
  return transform_weight(weight, Cin, Cout, true);
}

size_t conv2d_winograd_strip_scratch_size(int Cin, int Cout) {
  return size_t(kPoints) * kChunkTiles * (Cin + Cout) + size_t(std::max(Cin, Cout));
}

void conv2d_winograd_input_grad_strip(float* strip, const float* dout,
                                      const float* transformed_weight, float* scratch, int B,
                                      int Cin, int H, int W, int Cout, int b, int first_line,
                                      int lines) {
  const Shape s = make_shape(B, Cin, H, W, Cout);
  MPIASR_CHECK(b >= 0 && b < B && first_line >= 0 && lines >= 1 && first_line + lines <= s.Ho,
               "Winograd conv2d input gradient: b=" << b << " of " << B << ", lines [" << first_line
                                                    << ", " << first_line + lines << ") of "
                                                    << s.Ho);
  float* dm = scratch;
  float* dv = dm + size_t(kPoints) * kChunkTiles * Cout;
  float* zeros = dv + size_t(kPoints) * kChunkTiles * Cin;
  std::fill(zeros, zeros + std::max(Cin, Cout), 0.0f);
  const int strip_rows = 2 * lines + 1;
  std::fill(strip, strip + int64_t(strip_rows) * W * Cin, 0.0f);
  const float* dout_image = dout + int64_t(b) * s.Ho * s.Wo * Cout;
  const int tiles = tiles_along(lines, kOut) * s.tile_cols;
  for (int t0 = 0; t0 < tiles; t0 += kChunkTiles) {
    const int n = std::min(kChunkTiles, tiles - t0);
    // Tile t0 + t: strip-relative first output line and first column.
    const auto line_of = [&](int t) { return (t0 + t) / s.tile_cols * kOut; };
    const auto col_of = [&](int t) { return (t0 + t) % s.tile_cols * kOut; };
    for (int t = 0; t < n; ++t) {
      output_grad_transform(kOutputTransform, dm + int64_t(t) * Cout, int64_t(kChunkTiles) * Cout,
                            dout_image, s.Wo, Cout, first_line + line_of(t), col_of(t),
                            std::min(kOut, lines - line_of(t)), std::min(kOut, s.Wo - col_of(t)),
                            zeros);
    }
    point_products(dv, dm, transformed_weight, n, kChunkTiles, Cout, Cin);
    for (int t = 0; t < n; ++t) {
      input_grad_transform(strip, strip_rows, W, Cin, line_of(t), col_of(t), dv + int64_t(t) * Cin,
                           int64_t(kChunkTiles) * Cin);
    }
  }
}

void conv2d_winograd_weight_grad(float* dweight, const float* dout, const float* inp, int B,
                                 int Cin, int H, int W, int Cout) {
  const Shape s = make_shape(B, Cin, H, W, Cout);
  const int tile_rows = tiles_along(s.Ho, kGradOut);
  const int tile_cols = tiles_along(s.Wo, kGradOut);
  const int64_t tiles = int64_t(B) * tile_rows * tile_cols;
  const int64_t chunks = (tiles + kGradChunkTiles - 1) / kGradChunkTiles;
  const bool parallel = s.multiply_adds() >= kParallelMinMultiplyAdds;
  const int threads = parallel ? omp_get_max_threads() : 1;
  // One private dW [tap][Cin][Cout] per thread, summed in thread order.
  const size_t taps_size = size_t(9) * Cin * Cout;
  std::vector<float> dw(size_t(threads) * taps_size, 0.0f);
#pragma omp parallel if (parallel)
  {
    std::vector<float> v(size_t(kGradPoints) * kGradChunkTiles * Cin),
        dm(size_t(kGradOutputPoints) * kGradChunkTiles * Cout), zeros(std::max(Cin, Cout), 0.0f);
    float* my_dw = dw.data() + size_t(omp_get_thread_num()) * taps_size;
#pragma omp for schedule(static)
    for (int64_t chunk = 0; chunk < chunks; ++chunk) {
      const int64_t t0 = chunk * kGradChunkTiles;
      const int n = int(std::min<int64_t>(kGradChunkTiles, tiles - t0));
      for (int t = 0; t < n; ++t) {
        const Tile tile = tile_at(t0 + t, tile_rows, tile_cols, kGradOut);
        input_transform(kGradInputTransform, v.data() + int64_t(t) * Cin,
                        int64_t(kGradChunkTiles) * Cin, inp + int64_t(tile.b) * H * W * Cin, H, W,
                        Cin, tile.row, tile.col, zeros.data());
        output_grad_transform(
            kGradOutputTransform, dm.data() + int64_t(t) * Cout, int64_t(kGradChunkTiles) * Cout,
            dout + int64_t(tile.b) * s.Ho * s.Wo * Cout, s.Wo, Cout, tile.row, tile.col,
            std::min(kGradOut, s.Ho - tile.row), std::min(kGradOut, s.Wo - tile.col), zeros.data());
      }
      weight_grad_products(my_dw, v.data(), dm.data(), n, kGradChunkTiles, Cin, Cout);
    }
  }
  add_thread_partials(dw.data(), threads, taps_size);
  for (int co = 0; co < Cout; ++co)
    for (int ci = 0; ci < Cin; ++ci)
      for (int tap = 0; tap < 9; ++tap)
        dweight[(int64_t(co) * Cin + ci) * 9 + tap] += dw[(int64_t(tap) * Cin + ci) * Cout + co];
}

#else  // no AVX-512 build: the im2col path of conv2d.cpp runs everywhere

bool conv2d_winograd_available(int, int) {
  return false;
}

void conv2d_winograd_forward(float*, const float*, const float*, const float*, int, int, int, int,
                             int, bool) {
  MPIASR_CHECK(false, "Winograd conv2d is not built for this compiler or architecture");
}

std::vector<float> conv2d_winograd_input_grad_weight(const float*, int, int) {
  MPIASR_CHECK(false, "Winograd conv2d is not built for this compiler or architecture");
  return {};
}

void conv2d_winograd_weight_grad(float*, const float*, const float*, int, int, int, int, int) {
  MPIASR_CHECK(false, "Winograd conv2d is not built for this compiler or architecture");
}

size_t conv2d_winograd_strip_scratch_size(int, int) {
  return 0;
}

void conv2d_winograd_input_grad_strip(float*, const float*, const float*, float*, int, int, int,
                                      int, int, int, int, int) {
  MPIASR_CHECK(false, "Winograd conv2d is not built for this compiler or architecture");
}

#endif

// Each point's product is [tiles, Cin] x [Cin, Cout] (the forward), [tiles,
// Cout] x [Cout, Cin] (the input gradient) or [Cin, tiles] x [tiles, Cout]
// (the weight gradient): tiles x Cin x Cout multiply-adds a point.
int64_t conv2d_winograd_forward_multiply_adds(int B, int Cin, int H, int W, int Cout) {
  const int64_t tiles =
      int64_t(B) * tiles_along(conv2d_out_size(H), kOut) * tiles_along(conv2d_out_size(W), kOut);
  return tiles * kPoints * Cin * Cout;
}

int64_t conv2d_winograd_input_grad_multiply_adds(int B, int Cin, int H, int W, int Cout,
                                                 int strip_lines) {
  const int Ho = conv2d_out_size(H), tile_cols = tiles_along(conv2d_out_size(W), kOut);
  // Tiles per image: each strip's, as conv2d_winograd_input_grad_strip cuts it.
  int64_t tiles = 0;
  for (int first_line = 0; first_line < Ho; first_line += strip_lines)
    tiles += int64_t(tiles_along(std::min(strip_lines, Ho - first_line), kOut)) * tile_cols;
  return B * tiles * kPoints * Cin * Cout;
}

int64_t conv2d_winograd_weight_grad_multiply_adds(int B, int Cin, int H, int W, int Cout) {
  const int64_t tiles = int64_t(B) * tiles_along(conv2d_out_size(H), kGradOut) *
                        tiles_along(conv2d_out_size(W), kGradOut);
  return tiles * kGradPoints * Cin * Cout;
}

}  // namespace mpiasr
