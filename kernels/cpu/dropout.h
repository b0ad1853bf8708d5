// Dropout on the CPU with counter-based masks (kernels/philox.h):
//   out[i] = inp[i] * (dropout_keep(seed, offset + i, p) ? 1 / (1 - p) : 0)
// The mask is a pure function of (seed, offset + i), so it is the same for any
// thread count and on the GPU, and the backward pass recomputes it instead of
// storing it: dinp[i] = scale (keep ? dout[i] / (1 - p) : 0), scale that of a
// residual branch, applied in the same pass. p = 0 copies; p = 1 zeroes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mpiasr {

template <typename T>
void cpu_dropout_forward(T* out, const T* inp, float p, uint64_t seed, uint64_t offset, size_t n);

template <typename T>
void cpu_dropout_backward(T* dinp, const T* dout, float scale, float p, uint64_t seed,
                          uint64_t offset, size_t n);

// Swish then dropout in one pass, with the same bits as cpu_swish_forward
// followed by cpu_dropout_forward:
//   out[i] = swish(inp[i]) (keep ? 1 / (1 - p) : 0)
template <typename T>
void cpu_swish_dropout_forward(T* out, const T* inp, float p, uint64_t seed, uint64_t offset,
                               size_t n);

// Its backward in one pass, with the same bits as cpu_dropout_backward (scale
// 1) followed by cpu_swish_backward:
//   dinp[i] = swish_grad(inp[i], dout[i] (keep ? 1 / (1 - p) : 0))
template <typename T>
void cpu_swish_dropout_backward(T* dinp, const T* dout, const T* inp, float p, uint64_t seed,
                                uint64_t offset, size_t n);

// The stream's random bits are drawn a tile of 256 elements at a time:
// draw(bits, seed, tile) writes bits[e] = dropout_bits(seed, 256 tile + e),
// e < 256. dropout_tile_generators() lists the generators at or below the
// instruction-set level in use (kernels/cpu/simd.h), the fastest first,
// which is the one dropout uses (AVX-512, AVX2, then portable C); the tests
// check each against kernels/philox.h.
constexpr int kDropoutTileElements = 256;
struct DropoutTileGenerator {
  const char* name;
  void (*draw)(uint32_t* bits, uint64_t seed, uint64_t tile);
};
std::vector<DropoutTileGenerator> dropout_tile_generators();

}  // namespace mpiasr
