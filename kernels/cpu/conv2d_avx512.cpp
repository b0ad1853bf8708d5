// Direct 3x3 stride-2 convolution with AVX-512 tiles (see conv2d_avx512.h).
#include "kernels/cpu/conv2d_avx512.h"

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
constexpr int kBlockChannels = register_tile::kPanelColumns;  // channels per weight block
constexpr int kTilePixels = register_tile::kMaxRows;
constexpr int kChunkLines = 8;

struct Shape {
  int B, Cin, H, W, Cout, Ho, Wo;
  int64_t multiply_adds() const { return int64_t(B) * Ho * Wo * 9 * Cin * Cout; }
};

Shape make_shape(int B, int Cin, int H, int W, int Cout) {
  MPIASR_CHECK(
      conv2d_direct_available(Cin, Cout),
      "direct conv2d needs AVX-512, Cin > 1 and Cout % 16 == 0: Cin=" << Cin << " Cout=" << Cout);
  MPIASR_CHECK(B >= 0 && H >= 3 && W >= 3,
               "conv2d needs at least a 3x3 input: B=" << B << " H=" << H << " W=" << W);
  return {B, Cin, H, W, Cout, conv2d_out_size(H), conv2d_out_size(W)};
}

// A chunk: output lines [first_line, first_line + lines) of image b.
struct Chunk {
  int b, first_line, lines;
  int pixels(const Shape& s) const { return lines * s.Wo; }
  int64_t first_pixel(const Shape& s) const { return (int64_t(b) * s.Ho + first_line) * s.Wo; }
};

int chunks_per_image(const Shape& s) {
  return (s.Ho + kChunkLines - 1) / kChunkLines;
}

Chunk make_chunk(const Shape& s, int b, int c) {
  return {b, c * kChunkLines, std::min(kChunkLines, s.Ho - c * kChunkLines)};
}

// pixel_input[p] = input pixel (2i, 2j) of the chunk's output pixel p = (i, j),
// where its first tap reads; tap (kh, kw) reads tap_offset(tap) floats on.
void find_pixel_inputs(const float** pixel_input, const float* inp, const Shape& s,
                       const Chunk& chunk) {
  for (int p = 0; p < chunk.pixels(s); ++p) {
    const int i = chunk.first_line + p / s.Wo, j = p % s.Wo;
    pixel_input[p] = inp + ((int64_t(chunk.b) * s.H + 2 * i) * s.W + 2 * j) * s.Cin;
  }
}

int64_t tap_offset(const Shape& s, int tap) {
  return (int64_t(tap / 3) * s.W + tap % 3) * s.Cin;
}

int block_width(int Cout, int co0) {
  return std::min(kBlockChannels, Cout - co0);
}

// The weight W [Cout, Cin, 3, 3] in blocks of up to 48 channels of one side
// (the block side: outputs for the forward, inputs for the input gradient):
// the block of channels [c0, c0 + width) at P + c0 * 9 * other, laid out
// [tap = 3 kh + kw][other channel][width]. W's element (block channel c,
// other channel r, tap) is at c * block_stride + r * other_stride + tap.
std::vector<float> pack_weight_blocks(const float* weight, int block_channels, int other_channels,
                                      int64_t block_stride, int64_t other_stride) {
  std::vector<float> packed(size_t(block_channels) * 9 * other_channels);
  for (int c0 = 0; c0 < block_channels; c0 += kBlockChannels) {
    const int width = block_width(block_channels, c0);
    float* block = packed.data() + int64_t(c0) * 9 * other_channels;
    for (int v = 0; v < width; ++v)
      for (int r = 0; r < other_channels; ++r)
        for (int tap = 0; tap < 9; ++tap)
          block[(int64_t(tap) * other_channels + r) * width + v] =
              weight[(c0 + v) * block_stride + r * other_stride + tap];
  }
  return packed;
}

// From here to MPIASR_AVX512_END: built for AVX-512, run only where
// conv2d_direct_available says the CPU has it.
MPIASR_AVX512_BEGIN

// A chunk's output, block by block of output channels, tap by tap, tile by
// tile of pixels. pixel_input is room for the chunk's pointers.
void forward_chunk(float* out, const float* inp, const float* wp, const float* bias, const Shape& s,
                   const Chunk& chunk, bool relu, const float** pixel_input) {
  const int pixels = chunk.pixels(s);
  find_pixel_inputs(pixel_input, inp, s, chunk);
  float* chunk_out = out + chunk.first_pixel(s) * s.Cout;
  for (int co0 = 0; co0 < s.Cout; co0 += kBlockChannels) {
    const int width = block_width(s.Cout, co0);
    const float* block = wp + int64_t(co0) * 9 * s.Cin;
    for (int tap = 0; tap < 9; ++tap) {
      const int64_t offset = tap_offset(s, tap);
      const float* w = block + int64_t(tap) * s.Cin * width;
      const float* init = tap == 0 ? bias + co0 : nullptr;
      const bool last = tap == 8 && relu;
      for (int p0 = 0; p0 < pixels; p0 += kTilePixels) {
        const int n = std::min(kTilePixels, pixels - p0);
        float* o[kTilePixels];
        const float* x[kTilePixels];
        for (int p = 0; p < n; ++p) {
          o[p] = chunk_out + int64_t(p0 + p) * s.Cout + co0;
          x[p] = pixel_input[p0 + p] + offset;
        }
        register_tile::multiply_add(n, width, o, x, w, s.Cin, init, last);
      }
    }
  }
}

// The strip of conv2d_direct_input_grad_strip: zeroed, then block by block of
// input channels and tap by tap, each output pixel (i, j) of the chunk adds
// its gradient times the tap's weight to input pixel (2 i + kh, 2 j + kw) of
// the strip (i counted from the chunk's first line), in tiles of 8 output
// pixels.
void input_grad_strip(float* strip, const float* dout, const float* wq, const Shape& s,
                      const Chunk& chunk) {
  const int pixels = chunk.pixels(s);
  std::fill(strip, strip + int64_t(2 * chunk.lines + 1) * s.W * s.Cin, 0.0f);
  const float* chunk_dout = dout + chunk.first_pixel(s) * s.Cout;
  for (int ci0 = 0; ci0 < s.Cin; ci0 += kBlockChannels) {
    const int width = block_width(s.Cin, ci0);
    const float* block = wq + int64_t(ci0) * 9 * s.Cout;
    for (int tap = 0; tap < 9; ++tap) {
      const float* w = block + int64_t(tap) * s.Cout * width;
      float* tap_strip = strip + tap_offset(s, tap) + ci0;
      for (int p0 = 0; p0 < pixels; p0 += kTilePixels) {
        const int n = std::min(kTilePixels, pixels - p0);
        float* o[kTilePixels];
        const float* g[kTilePixels];
        for (int p = 0; p < n; ++p) {
          const int i = (p0 + p) / s.Wo, j = (p0 + p) % s.Wo;
          o[p] = tap_strip + (int64_t(2 * i) * s.W + 2 * j) * s.Cin;
          g[p] = chunk_dout + int64_t(p0 + p) * s.Cout;
        }
        register_tile::multiply_add(n, width, o, g, w, s.Cout, nullptr, false);
      }
    }
  }
}

MPIASR_AVX512_END

}  // namespace

bool conv2d_direct_available(int Cin, int Cout) {
  static const bool avx512 = cpu_vector_features().avx512;
  return avx512 && Cin > 1 && Cout % kLanes == 0;
}

void conv2d_direct_forward(float* out, const float* inp, const float* weight, const float* bias,
                           int B, int Cin, int H, int W, int Cout, bool relu) {
  const Shape s = make_shape(B, Cin, H, W, Cout);
  // Blocks of output channels: W[co, ci, tap] at co * 9 Cin + ci * 9 + tap.
  const std::vector<float> wp = pack_weight_blocks(weight, Cout, Cin, int64_t(9) * Cin, 9);
  const std::vector<float> bias_or_zero =
      bias ? std::vector<float>(bias, bias + Cout) : std::vector<float>(Cout);
  const int chunks = chunks_per_image(s);
#pragma omp parallel if (s.multiply_adds() >= kParallelMinMultiplyAdds)
  {
    std::vector<const float*> pixel_input(size_t(kChunkLines) * s.Wo);
#pragma omp for schedule(static) collapse(2)
    for (int b = 0; b < B; ++b) {
      for (int c = 0; c < chunks; ++c) {
        forward_chunk(out, inp, wp.data(), bias_or_zero.data(), s, make_chunk(s, b, c), relu,
                      pixel_input.data());
      }
    }
  }
}

std::vector<float> conv2d_direct_pack_input_grad_weight(const float* weight, int Cin, int Cout) {
  MPIASR_CHECK(conv2d_direct_available(Cin, Cout) && Cin % kLanes == 0,
               "direct conv2d input gradient needs AVX-512 and Cin, Cout multiples of 16: Cin="
                   << Cin << " Cout=" << Cout);
  // Blocks of input channels: W[co, ci, tap] at ci * 9 + co * 9 Cin + tap.
  return pack_weight_blocks(weight, Cin, Cout, 9, int64_t(9) * Cin);
}

void conv2d_direct_input_grad_strip(float* strip, const float* dout, const float* packed_weight,
                                    int B, int Cin, int H, int W, int Cout, int b, int first_line,
                                    int lines) {
  const Shape s = make_shape(B, Cin, H, W, Cout);
  MPIASR_CHECK(Cin % kLanes == 0 && b >= 0 && b < B && first_line >= 0 && lines >= 1 &&
                   first_line + lines <= s.Ho,
               "direct conv2d input gradient: Cin=" << Cin << " b=" << b << " of " << B
                                                    << ", lines [" << first_line << ", "
                                                    << first_line + lines << ") of " << s.Ho);
  input_grad_strip(strip, dout, packed_weight, s, {b, first_line, lines});
}

#else  // no AVX-512 build: the im2col path of conv2d.cpp runs everywhere

bool conv2d_direct_available(int, int) {
  return false;
}

void conv2d_direct_forward(float*, const float*, const float*, const float*, int, int, int, int,
                           int, bool) {
  MPIASR_CHECK(false, "direct conv2d is not built for this compiler or architecture");
}

std::vector<float> conv2d_direct_pack_input_grad_weight(const float*, int, int) {
  MPIASR_CHECK(false, "direct conv2d is not built for this compiler or architecture");
  return {};
}

void conv2d_direct_input_grad_strip(float*, const float*, const float*, int, int, int, int, int,
                                    int, int, int) {
  MPIASR_CHECK(false, "direct conv2d is not built for this compiler or architecture");
}

#endif

}  // namespace mpiasr
