// Strided Winograd convolution, 4 x 4 output tiles (see conv2d_winograd.h).
#include "kernels/cpu/conv2d_winograd.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "kernels/cpu/conv2d.h"
#include "kernels/cpu/parallel.h"
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

#if MPIASR_SIMD_X86

namespace {

// The channels must be a multiple of this: a whole number of Vecs of
// conv2d_winograd_simd.h at every level.
constexpr int kChannelMultiple = 16;

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
               "Winograd conv2d needs AVX2 or AVX-512 and Cin, Cout multiples of 16: Cin="
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

// U [point][Cin][Cout] = G W G^T (transposed: [point][Cout][Cin]), in double,
// a row of U at a time: the row's 81 points go to a buffer first and then to
// U as 81 runs of `columns` floats: 1.4-2.2 ms a call at C = 144, against
// 5.7-5.9 with 81 scattered stores per weight (and the rows in parallel
// were no faster on 2 threads). Each point's matrix is stored as panels of
// `block` columns (the last one narrower), each panel's rows contiguous:
// U[p][r][c] is at p rows columns + c0 rows + r width + (c - c0), for the
// panel [c0, c0 + width) holding c. The register tile then reads its panel
// as one stream (conv2d_winograd_simd.h); read a row apart (rows of
// `columns` floats), the AVX2 point products ran at 41-56 GFLOP/s against
// 69-76 on an AMD EPYC (1 thread, C = 144).
std::vector<float> transform_weight(const float* weight, int Cin, int Cout, bool transposed,
                                    int block) {
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
      for (int c0 = 0; c0 < columns; c0 += block) {
        const int width = std::min(block, columns - c0);
        float* u_row = u.data() + int64_t(p) * rows * columns + int64_t(c0) * rows + row * width;
        for (int c = 0; c < width; ++c) u_row[c] = float(row_points[size_t(p) * columns + c0 + c]);
      }
    }
  }
  return u;
}

}  // namespace

}  // namespace mpiasr

#define MPIASR_SIMD_SOURCE "kernels/cpu/conv2d_winograd_simd.h"
#include "kernels/cpu/simd_levels.h"

namespace mpiasr {

bool conv2d_winograd_available(int Cin, int Cout) {
  return simd_level() >= SimdLevel::kAvx2 && Cin % kChannelMultiple == 0 &&
         Cout % kChannelMultiple == 0;
}

bool conv2d_winograd_weight_grad_chosen(int Cin, int Cout) {
  return simd_level() == SimdLevel::kAvx512 && conv2d_winograd_available(Cin, Cout);
}

void conv2d_winograd_forward(float* out, const float* inp, const float* weight, const float* bias,
                             int B, int Cin, int H, int W, int Cout, bool relu) {
  const Shape s = make_shape(B, Cin, H, W, Cout);
  const std::vector<float> u =
      transform_weight(weight, Cin, Cout, false, MPIASR_SIMD_CALL(block_channels));
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
      MPIASR_SIMD_CALL(forward_chunk, out, inp, u.data(), bias_or_zero.data(), s, t0, n, v.data(),
                       m.data(), zeros.data(), relu);
    }
  }
}

std::vector<float> conv2d_winograd_input_grad_weight(const float* weight, int Cin, int Cout) {
  make_shape(1, Cin, 3, 3, Cout);  // checks the channels
  return transform_weight(weight, Cin, Cout, true, MPIASR_SIMD_CALL(block_channels));
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
    MPIASR_SIMD_CALL(input_grad_chunk, strip, strip_rows, dout_image, transformed_weight, s,
                     first_line, lines, t0, n, dm, dv, zeros);
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
      MPIASR_SIMD_CALL(weight_grad_chunk, my_dw, inp, dout, s, tile_rows, tile_cols, t0, n,
                       v.data(), dm.data(), zeros.data());
    }
  }
  add_thread_partials(dw.data(), threads, taps_size);
  for (int co = 0; co < Cout; ++co)
    for (int ci = 0; ci < Cin; ++ci)
      for (int tap = 0; tap < 9; ++tap)
        dweight[(int64_t(co) * Cin + ci) * 9 + tap] += dw[(int64_t(tap) * Cin + ci) * Cout + co];
}

#else  // no x86-64 GCC build: the im2col path of conv2d.cpp runs everywhere

bool conv2d_winograd_available(int, int) {
  return false;
}

bool conv2d_winograd_weight_grad_chosen(int, int) {
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
