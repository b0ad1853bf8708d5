// Dropout in tiles of 32 Philox blocks (256 elements): a vectorized loop draws
// the tile's random bits, a second applies the mask (see dropout.h).
#include "kernels/cpu/dropout.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"
#include "kernels/philox.h"
#include "src/base/error.h"

namespace mpiasr {

namespace {

constexpr int kTileBlocks = 32;
constexpr int kTileElements = kTileBlocks * kDropoutElementsPerBlock;

// bits[e] = dropout_bits(seed, tile * kTileElements + e) for the whole tile.
MPIASR_SIMD_CLONES void draw_tile(uint32_t* bits, uint64_t seed, uint64_t tile) {
  for (int j = 0; j < kTileBlocks; ++j) {
    dropout_block_bits(seed, tile * kTileBlocks + j, bits + j * kDropoutElementsPerBlock);
  }
}

}  // namespace

template <typename T>
MPIASR_SIMD_CLONES void cpu_dropout_forward(T* out, const T* inp, float p, uint64_t seed,
                                            uint64_t offset, size_t n) {
  MPIASR_CHECK(p >= 0.0f && p <= 1.0f, "dropout probability " << p << " is outside [0, 1]");
  if (p == 0.0f) {
    if (out != inp) std::memcpy(out, inp, sizeof(T) * n);
    return;
  }
  if (p == 1.0f) {
    std::memset(out, 0, sizeof(T) * n);
    return;
  }
  if (n == 0) return;
  const T scale = T(1) / (T(1) - T(p));
  const uint32_t threshold = dropout_threshold(p);
  // Stream positions [offset, offset + n) lie in tiles [first_tile, end_tile).
  const int64_t first_tile = int64_t(offset / kTileElements);
  const int64_t end_tile = int64_t((offset + n + kTileElements - 1) / kTileElements);
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(n)))
  for (int64_t tile = first_tile; tile < end_tile; ++tile) {
    uint32_t bits[kTileElements];
    draw_tile(bits, seed, uint64_t(tile));
    const uint64_t tile_start = uint64_t(tile) * kTileElements;
    const uint64_t begin = std::max(tile_start, offset);
    const uint64_t end = std::min(tile_start + kTileElements, offset + n);
    const uint32_t* tile_bits = bits + (begin - tile_start);
    const T* x = inp + (begin - offset);
    T* y = out + (begin - offset);
    const int count = int(end - begin);
    for (int e = 0; e < count; ++e) y[e] = x[e] * (tile_bits[e] >= threshold ? scale : T(0));
  }
}

template <typename T>
void cpu_dropout_backward(T* dinp, const T* dout, float scale, float p, uint64_t seed,
                          uint64_t offset, size_t n) {
  // The gradient passes through the same mask with the same scale.
  cpu_dropout_forward(dinp, dout, p, seed, offset, n);
  if (scale == 1.0f) return;
  const T s = T(scale);
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(n)))
  for (size_t i = 0; i < n; ++i) dinp[i] *= s;
}

template void cpu_dropout_forward<float>(float*, const float*, float, uint64_t, uint64_t, size_t);
template void cpu_dropout_forward<double>(double*, const double*, float, uint64_t, uint64_t,
                                          size_t);
template void cpu_dropout_backward<float>(float*, const float*, float, float, uint64_t, uint64_t,
                                          size_t);
template void cpu_dropout_backward<double>(double*, const double*, float, float, uint64_t, uint64_t,
                                           size_t);

}  // namespace mpiasr
