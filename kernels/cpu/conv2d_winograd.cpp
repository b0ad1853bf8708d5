// Strided Winograd convolution, 4 x 4 output tiles (see conv2d_winograd.h).
#include "kernels/cpu/conv2d_winograd.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/register_tile.h"
#include "src/base/error.h"

namespace mpiasr {

#if MPIASR_REGISTER_TILE

namespace {

constexpr int kLanes = register_tile::kLanes;
constexpr int kBlockChannels = register_tile::kPanelColumns;
constexpr int kTileRows = register_tile::kMaxRows;

// Along one axis: output pixels of a tile, input pixels it reads, points.
constexpr int kOut = kConv2dWinogradTileLines;
constexpr int kSpan = 2 * kOut + 1;
constexpr int kAxisPoints = 2 * kOut + 1;
constexpr int kPoints = kAxisPoints * kAxisPoints;

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

// Tiles per chunk: V and M of a chunk are 81 x 16 x 144 floats each at
// C = 144 (750 KB); 32 and 64 tiles were no faster.
constexpr int kChunkTiles = 16;

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
  return {B, Cin, H, W, Cout, Ho, Wo, (Ho + kOut - 1) / kOut, (Wo + kOut - 1) / kOut};
}

// Tile t of the whole batch, in image, tile-row, tile-column order.
struct Tile {
  int b, row, col;  // image; first output line and column
};

Tile tile_at(const Shape& s, int64_t t) {
  const int64_t per_image = int64_t(s.tile_rows) * s.tile_cols;
  const int within = int(t % per_image);
  return {int(t / per_image), within / s.tile_cols * kOut, within % s.tile_cols * kOut};
}

int block_width(int channels, int c0) {
  return std::min(kBlockChannels, channels - c0);
}

// U [point][Cin][Cout] = G W G^T (transposed: [point][Cout][Cin]), in double.
// The inner loop runs along U's rows.
std::vector<float> transform_weight(const float* weight, int Cin, int Cout, bool transposed) {
  std::vector<float> u(size_t(kPoints) * Cin * Cout);
  const int rows = transposed ? Cout : Cin, columns = transposed ? Cin : Cout;
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
          const double value = gw[pu][0] * kWeightTransform[pv][0] +
                               gw[pu][1] * kWeightTransform[pv][1] +
                               gw[pu][2] * kWeightTransform[pv][2];
          u[((int64_t(pu) * kAxisPoints + pv) * rows + row) * columns + column] = float(value);
        }
      }
    }
  }
  return u;
}

// From here to MPIASR_AVX512_END: built for AVX-512, run only where
// conv2d_winograd_available says the CPU has it.
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

// V[p] (at v + p point_stride) = Bt X Bt^T for the 9 x 9 input pixels of the
// tile whose first output pixel is (row, col) of image `image` [H, W, C];
// pixels outside the image read `zeros`. 16 channels at a time, in registers.
void input_transform(float* v, int64_t point_stride, const float* image, int H, int W, int C,
                     int row, int col, const float* zeros) {
  const int r0 = 2 * row, c0 = 2 * col;
  const float* pixel[kSpan][kSpan];
  for (int su = 0; su < kSpan; ++su)
    for (int sv = 0; sv < kSpan; ++sv)
      pixel[su][sv] =
          r0 + su < H && c0 + sv < W ? image + ((int64_t(r0) + su) * W + c0 + sv) * C : zeros;
  for (int c = 0; c < C; c += kLanes) {
    Vec rows[kSpan][kAxisPoints];  // X Bt^T
    for (int su = 0; su < kSpan; ++su) {
      Vec x[kSpan];
      for (int sv = 0; sv < kSpan; ++sv) x[sv] = load(pixel[su][sv] + c);
      times(rows[su], kInputTransform, x);
    }
    for (int pv = 0; pv < kAxisPoints; ++pv) {
      Vec column[kSpan], out[kAxisPoints];
      for (int su = 0; su < kSpan; ++su) column[su] = rows[su][pv];
      times(out, kInputTransform, column);
      for (int pu = 0; pu < kAxisPoints; ++pu)
        store(v + (pu * kAxisPoints + pv) * point_stride + c, out[pu]);
    }
  }
}

// dM[p] (at dm + p point_stride) = At^T dY At for the tile whose first output
// pixel is (row, col): dY's pixel (a, b) is at dout_image [Ho, Wo, C]
// (row + a, col + b) for a < rows, b < cols, and `zeros` elsewhere.
void output_grad_transform(float* dm, int64_t point_stride, const float* dout_image, int Wo, int C,
                           int row, int col, int rows, int cols, const float* zeros) {
  const float* pixel[kOut][kOut];
  for (int a = 0; a < kOut; ++a)
    for (int b = 0; b < kOut; ++b)
      pixel[a][b] =
          a < rows && b < cols ? dout_image + ((int64_t(row) + a) * Wo + col + b) * C : zeros;
  for (int c = 0; c < C; c += kLanes) {
    Vec rows_at[kOut][kAxisPoints];  // dY At
    for (int a = 0; a < kOut; ++a) {
      Vec d[kOut];
      for (int b = 0; b < kOut; ++b) d[b] = load(pixel[a][b] + c);
      times_transposed(rows_at[a], kOutputTransform, d);
    }
    for (int pv = 0; pv < kAxisPoints; ++pv) {
      Vec column[kOut], out[kAxisPoints];
      for (int a = 0; a < kOut; ++a) column[a] = rows_at[a][pv];
      times_transposed(out, kOutputTransform, column);
      for (int pu = 0; pu < kAxisPoints; ++pu)
        store(dm + (pu * kAxisPoints + pv) * point_stride + c, out[pu]);
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
        register_tile::multiply(rows, width, o, x, up + c0, N, K);
      }
    }
  }
}

MPIASR_AVX512_END

}  // namespace

bool conv2d_winograd_available(int Cin, int Cout) {
  static const bool avx512 = cpu_vector_features().avx512;
  return avx512 && Cin % kLanes == 0 && Cout % kLanes == 0;
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
        const Tile tile = tile_at(s, t0 + t);
        input_transform(v.data() + int64_t(t) * Cin, int64_t(kChunkTiles) * Cin,
                        inp + int64_t(tile.b) * H * W * Cin, H, W, Cin, tile.row, tile.col,
                        zeros.data());
      }
      point_products(m.data(), v.data(), u.data(), n, kChunkTiles, Cin, Cout);
      for (int t = 0; t < n; ++t) {
        const Tile tile = tile_at(s, t0 + t);
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
  const int tile_rows = (lines + kOut - 1) / kOut;
  const int tiles = tile_rows * s.tile_cols;
  for (int t0 = 0; t0 < tiles; t0 += kChunkTiles) {
    const int n = std::min(kChunkTiles, tiles - t0);
    // Tile t0 + t: strip-relative first output line and first column.
    const auto line_of = [&](int t) { return (t0 + t) / s.tile_cols * kOut; };
    const auto col_of = [&](int t) { return (t0 + t) % s.tile_cols * kOut; };
    for (int t = 0; t < n; ++t) {
      output_grad_transform(dm + int64_t(t) * Cout, int64_t(kChunkTiles) * Cout, dout_image, s.Wo,
                            Cout, first_line + line_of(t), col_of(t),
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

size_t conv2d_winograd_strip_scratch_size(int, int) {
  return 0;
}

void conv2d_winograd_input_grad_strip(float*, const float*, const float*, float*, int, int, int,
                                      int, int, int, int, int) {
  MPIASR_CHECK(false, "Winograd conv2d is not built for this compiler or architecture");
}

#endif

}  // namespace mpiasr
