// Dropout in tiles of 32 Philox blocks (256 elements): one loop draws the
// tile's random bits (by hand with AVX-512 or AVX2 at those levels of
// kernels/cpu/simd.h), a second applies the mask, with the Swish before it
// or the branch's scale after it in the same pass (see dropout.h).
#include "kernels/cpu/dropout.h"

#include <algorithm>
#include <cstring>

#include "kernels/activations.h"
#include "kernels/cpu/activations.h"
#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"
#include "kernels/philox.h"
#include "src/base/error.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
// GCC 12 warns that the AVX-512 intrinsics' own placeholder operands are used
// uninitialized (GCC bug 105593, fixed in GCC 13); the warning points into
// the header, whose state this sets.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#define MPIASR_DROPOUT_X86 1
#else
#define MPIASR_DROPOUT_X86 0
#endif

namespace mpiasr {

namespace {

constexpr int kTileBlocks = 32;
constexpr int kTileElements = kTileBlocks * kDropoutElementsPerBlock;
static_assert(kTileElements == kDropoutTileElements);

using DrawTile = void (*)(uint32_t* bits, uint64_t seed, uint64_t tile);

// bits[e] = dropout_bits(seed, tile * kTileElements + e) for the whole tile,
// one Philox block at a time (the compiler vectorizes across blocks). Built
// for the generic level only: at the avx2 and avx512 levels the tiles below
// draw the bits.
void draw_tile_portable(uint32_t* bits, uint64_t seed, uint64_t tile) {
  for (int j = 0; j < kTileBlocks; ++j) {
    dropout_block_bits(seed, tile * kTileBlocks + j, bits + j * kDropoutElementsPerBlock);
  }
}

#if MPIASR_DROPOUT_X86
// The same tile with AVX2, eight Philox blocks per vector (one per 32-bit
// lane) and four vectors in flight to cover the multiplies' latency. A round's
// 32x32 -> 64-bit products take two vpmuludq, one for the even lanes and one
// for the odd lanes shifted down; blends put the low and high halves back in
// lane order. At the end the lanes hold [block][word], and an 8 x 8 transpose
// of the 16-bit halves gives the stream's order [block][element].
__attribute__((target("avx2"))) inline void multiply_wide(__m256i a, __m256i m, __m256i& lo,
                                                          __m256i& hi) {
  const __m256i even = _mm256_mul_epu32(a, m);
  const __m256i odd = _mm256_mul_epu32(_mm256_srli_epi64(a, 32), m);
  lo = _mm256_blend_epi32(even, _mm256_slli_epi64(odd, 32), 0xAA);
  hi = _mm256_blend_epi32(_mm256_srli_epi64(even, 32), odd, 0xAA);
}

// Stores the 64 elements of eight blocks whose words are w0..w3 (lane = block).
__attribute__((target("avx2"))) inline void store_block_elements(uint32_t* bits, __m256i w0,
                                                                 __m256i w1, __m256i w2,
                                                                 __m256i w3) {
  const __m256i low16 = _mm256_set1_epi32(0xffff);
  // Row e holds element e of each block.
  const __m256i r0 = _mm256_and_si256(w0, low16), r1 = _mm256_srli_epi32(w0, 16);
  const __m256i r2 = _mm256_and_si256(w1, low16), r3 = _mm256_srli_epi32(w1, 16);
  const __m256i r4 = _mm256_and_si256(w2, low16), r5 = _mm256_srli_epi32(w2, 16);
  const __m256i r6 = _mm256_and_si256(w3, low16), r7 = _mm256_srli_epi32(w3, 16);
  const __m256i t0 = _mm256_unpacklo_epi32(r0, r1), t1 = _mm256_unpackhi_epi32(r0, r1);
  const __m256i t2 = _mm256_unpacklo_epi32(r2, r3), t3 = _mm256_unpackhi_epi32(r2, r3);
  const __m256i t4 = _mm256_unpacklo_epi32(r4, r5), t5 = _mm256_unpackhi_epi32(r4, r5);
  const __m256i t6 = _mm256_unpacklo_epi32(r6, r7), t7 = _mm256_unpackhi_epi32(r6, r7);
  const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
  const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
  const __m256i u4 = _mm256_unpacklo_epi64(t4, t6), u5 = _mm256_unpackhi_epi64(t4, t6);
  const __m256i u6 = _mm256_unpacklo_epi64(t5, t7), u7 = _mm256_unpackhi_epi64(t5, t7);
  __m256i* out = reinterpret_cast<__m256i*>(bits);
  _mm256_storeu_si256(out + 0, _mm256_permute2x128_si256(u0, u4, 0x20));
  _mm256_storeu_si256(out + 1, _mm256_permute2x128_si256(u1, u5, 0x20));
  _mm256_storeu_si256(out + 2, _mm256_permute2x128_si256(u2, u6, 0x20));
  _mm256_storeu_si256(out + 3, _mm256_permute2x128_si256(u3, u7, 0x20));
  _mm256_storeu_si256(out + 4, _mm256_permute2x128_si256(u0, u4, 0x31));
  _mm256_storeu_si256(out + 5, _mm256_permute2x128_si256(u1, u5, 0x31));
  _mm256_storeu_si256(out + 6, _mm256_permute2x128_si256(u2, u6, 0x31));
  _mm256_storeu_si256(out + 7, _mm256_permute2x128_si256(u3, u7, 0x31));
}

__attribute__((target("avx2"))) void draw_tile_avx2(uint32_t* bits, uint64_t seed, uint64_t tile) {
  constexpr int kLanes = 8, kInFlight = 4;
  static_assert(kTileBlocks == kLanes * kInFlight, "one pass draws the whole tile");
  const __m256i m0 = _mm256_set1_epi32(int(kPhiloxM0)), m1 = _mm256_set1_epi32(int(kPhiloxM1));
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  __m256i c0[kInFlight], c1[kInFlight], c2[kInFlight], c3[kInFlight];
  for (int q = 0; q < kInFlight; ++q) {
    // Eight consecutive blocks from a multiple of 8 share the counter's high word.
    const uint64_t first = tile * kTileBlocks + uint64_t(q) * kLanes;
    c0[q] = _mm256_add_epi32(_mm256_set1_epi32(int(uint32_t(first))), lane);
    c1[q] = _mm256_set1_epi32(int(uint32_t(first >> 32)));
    c2[q] = c3[q] = _mm256_setzero_si256();
  }
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  for (int round = 0; round < 10; ++round) {
    const __m256i key0 = _mm256_set1_epi32(int(k0)), key1 = _mm256_set1_epi32(int(k1));
    for (int q = 0; q < kInFlight; ++q) {
      __m256i lo0, hi0, lo1, hi1;
      multiply_wide(c0[q], m0, lo0, hi0);
      multiply_wide(c2[q], m1, lo1, hi1);
      c0[q] = _mm256_xor_si256(_mm256_xor_si256(hi1, c1[q]), key0);
      c1[q] = lo1;
      c2[q] = _mm256_xor_si256(_mm256_xor_si256(hi0, c3[q]), key1);
      c3[q] = lo0;
    }
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  for (int q = 0; q < kInFlight; ++q) {
    store_block_elements(bits + q * kLanes * kDropoutElementsPerBlock, c0[q], c1[q], c2[q], c3[q]);
  }
}

// The same tile with AVX-512, one Philox block per 64-bit lane: its words
// sit in the lanes' low halves, where vpmuludq reads them and puts the whole
// 64-bit product, so a round is two multiplies, two shifts (the high words
// down) and two three-way xors (vpternlogd), with no blends to split and
// rejoin the products as in the AVX2 tile. The high halves carry garbage that
// no multiply reads. Four vectors of eight blocks make the tile. At the end,
// per block, the words w0..w3 in order are its eight 16-bit elements in order:
// two blends, two unpacks and two permutes bring each block's four words
// together, and a zero extension of the 16-bit halves gives the elements.
__attribute__((target("avx512f"))) void draw_tile_avx512(uint32_t* bits, uint64_t seed,
                                                         uint64_t tile) {
  constexpr int kLanes = 8, kVectors = 4;
  static_assert(kTileBlocks == kLanes * kVectors, "one pass draws the whole tile");
  const __m512i m0 = _mm512_set1_epi64(kPhiloxM0), m1 = _mm512_set1_epi64(kPhiloxM1);
  const __m512i lane = _mm512_setr_epi64(0, 1, 2, 3, 4, 5, 6, 7);
  __m512i c0[kVectors], c1[kVectors], c2[kVectors], c3[kVectors];
  for (int q = 0; q < kVectors; ++q) {
    // Eight consecutive blocks from a multiple of 8 share the counter's high word.
    const uint64_t first = tile * kTileBlocks + uint64_t(q) * kLanes;
    c0[q] = _mm512_add_epi64(_mm512_set1_epi64(int64_t(uint32_t(first))), lane);
    c1[q] = _mm512_set1_epi64(int64_t(first >> 32));
    c2[q] = c3[q] = _mm512_setzero_si512();
  }
  uint32_t k0 = uint32_t(seed), k1 = uint32_t(seed >> 32);
  constexpr int kXor3 = 0x96;  // vpternlogd's truth table of a ^ b ^ c
  for (int round = 0; round < 10; ++round) {
    const __m512i key0 = _mm512_set1_epi64(k0), key1 = _mm512_set1_epi64(k1);
    for (int q = 0; q < kVectors; ++q) {
      const __m512i p0 = _mm512_mul_epu32(c0[q], m0), p1 = _mm512_mul_epu32(c2[q], m1);
      c0[q] = _mm512_ternarylogic_epi32(_mm512_srli_epi64(p1, 32), c1[q], key0, kXor3);
      c1[q] = p1;
      c2[q] = _mm512_ternarylogic_epi32(_mm512_srli_epi64(p0, 32), c3[q], key1, kXor3);
      c3[q] = p0;
    }
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  const __m512i first_four = _mm512_setr_epi64(0, 1, 8, 9, 2, 3, 10, 11);
  const __m512i last_four = _mm512_setr_epi64(4, 5, 12, 13, 6, 7, 14, 15);
  for (int q = 0; q < kVectors; ++q) {
    // Lane j: (w0, w1) of block j, then (w2, w3).
    const __m512i w01 = _mm512_mask_blend_epi32(0xAAAA, c0[q], _mm512_slli_epi64(c1[q], 32));
    const __m512i w23 = _mm512_mask_blend_epi32(0xAAAA, c2[q], _mm512_slli_epi64(c3[q], 32));
    // 128-bit lane i: w0..w3 of block 2i (even) and of block 2i + 1 (odd).
    const __m512i even = _mm512_unpacklo_epi64(w01, w23), odd = _mm512_unpackhi_epi64(w01, w23);
    // Blocks 0-3 and 4-7 in order.
    const __m512i low = _mm512_permutex2var_epi64(even, first_four, odd);
    const __m512i high = _mm512_permutex2var_epi64(even, last_four, odd);
    __m512i* out = reinterpret_cast<__m512i*>(bits + q * kLanes * kDropoutElementsPerBlock);
    _mm512_storeu_si512(out + 0, _mm512_cvtepu16_epi32(_mm512_castsi512_si256(low)));
    _mm512_storeu_si512(out + 1, _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(low, 1)));
    _mm512_storeu_si512(out + 2, _mm512_cvtepu16_epi32(_mm512_castsi512_si256(high)));
    _mm512_storeu_si512(out + 3, _mm512_cvtepu16_epi32(_mm512_extracti64x4_epi64(high, 1)));
  }
}
#endif

// The tile generator dropout uses: the fastest at the level in use (the first
// of dropout_tile_generators()). On the AVX-512 Xeon, per element: AVX-512
// 0.32-0.34 ns, AVX2 0.50-0.58, portable 0.90-0.96 (3 alternations of
// 200,000 tiles each).
DrawTile fastest_draw_tile() {
#if MPIASR_DROPOUT_X86
  if (simd_level() == SimdLevel::kAvx512) return draw_tile_avx512;
  if (simd_level() == SimdLevel::kAvx2) return draw_tile_avx2;
#endif
  return draw_tile_portable;
}

void check_probability(float p) {
  MPIASR_CHECK(p >= 0.0f && p <= 1.0f, "dropout probability " << p << " is outside [0, 1]");
}

}  // namespace
}  // namespace mpiasr

#define MPIASR_SIMD_SOURCE "kernels/cpu/dropout_simd.h"
#include "kernels/cpu/simd_levels.h"

namespace mpiasr {

template <typename T>
void cpu_dropout_forward(T* out, const T* inp, float p, uint64_t seed, uint64_t offset, size_t n) {
  check_probability(p);
  if (p == 0.0f) {
    if (out != inp) std::memcpy(out, inp, sizeof(T) * n);
    return;
  }
  if (p == 1.0f) {
    std::memset(out, 0, sizeof(T) * n);
    return;
  }
  const auto value = [&](size_t i, T factor) { return inp[i] * factor; };
  MPIASR_SIMD_CALL(apply_dropout, out, p, seed, offset, n, value);
}

template <typename T>
void cpu_dropout_backward(T* dinp, const T* dout, float scale, float p, uint64_t seed,
                          uint64_t offset, size_t n) {
  MPIASR_SIMD_CALL(cpu_dropout_backward, dinp, dout, scale, p, seed, offset, n);
}

template <typename T>
void cpu_swish_dropout_forward(T* out, const T* inp, float p, uint64_t seed, uint64_t offset,
                               size_t n) {
  check_probability(p);
  if (p == 0.0f) {
    cpu_swish_forward(out, inp, n);
    return;
  }
  if (p == 1.0f) {  // zeroes, with no Swish to throw away
    cpu_dropout_forward(out, inp, p, seed, offset, n);
    return;
  }
  const auto value = [&](size_t i, T factor) { return swish(inp[i]) * factor; };
  MPIASR_SIMD_CALL(apply_dropout, out, p, seed, offset, n, value);
}

template <typename T>
void cpu_swish_dropout_backward(T* dinp, const T* dout, const T* inp, float p, uint64_t seed,
                                uint64_t offset, size_t n) {
  check_probability(p);
  if (p == 0.0f || p == 1.0f) {
    if (p == 1.0f) {
      cpu_dropout_forward(dinp, dout, p, seed, offset, n);
      dout = dinp;
    }
    cpu_swish_backward(dinp, dout, inp, n);
    return;
  }
  const auto value = [&](size_t i, T factor) { return swish_grad(inp[i], dout[i] * factor); };
  MPIASR_SIMD_CALL(apply_dropout, dinp, p, seed, offset, n, value);
}

std::vector<DropoutTileGenerator> dropout_tile_generators() {
  std::vector<DropoutTileGenerator> generators;
#if MPIASR_DROPOUT_X86
  if (simd_level() >= SimdLevel::kAvx512) generators.push_back({"avx512", draw_tile_avx512});
  if (simd_level() >= SimdLevel::kAvx2) generators.push_back({"avx2", draw_tile_avx2});
#endif
  generators.push_back({"portable", draw_tile_portable});
  return generators;
}

template void cpu_dropout_forward<float>(float*, const float*, float, uint64_t, uint64_t, size_t);
template void cpu_dropout_forward<double>(double*, const double*, float, uint64_t, uint64_t,
                                          size_t);
template void cpu_dropout_backward<float>(float*, const float*, float, float, uint64_t, uint64_t,
                                          size_t);
template void cpu_dropout_backward<double>(double*, const double*, float, float, uint64_t, uint64_t,
                                           size_t);
template void cpu_swish_dropout_forward<float>(float*, const float*, float, uint64_t, uint64_t,
                                               size_t);
template void cpu_swish_dropout_forward<double>(double*, const double*, float, uint64_t, uint64_t,
                                                size_t);
template void cpu_swish_dropout_backward<float>(float*, const float*, const float*, float, uint64_t,
                                                uint64_t, size_t);
template void cpu_swish_dropout_backward<double>(double*, const double*, const double*, float,
                                                 uint64_t, uint64_t, size_t);

}  // namespace mpiasr
