// Philox4x32-10, the counter-based random number generator of Salmon et al.,
// "Parallel random numbers: as easy as 1, 2, 3" (SC 2011), as in Random123
// and cuRAND. A block of four 32-bit outputs is a pure function of a 128-bit
// counter and a 64-bit key, so any thread on any device draws the same value
// for the same (seed, index) without shared state.
//
//   round:  (hi0, lo0) = M0 * c0 ; (hi1, lo1) = M1 * c2       (32x32 -> 64 bit)
//           c = (hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0)
//   key:    k0 += W0, k1 += W1 between rounds; ten rounds.
//
// Dropout stream of a seed: block j has counter (j as two 32-bit words, 0, 0)
// and key (seed as two 32-bit words); element i draws 16 bits, half (i mod 2)
// of word (i / 2) mod 4 of block i / 8, and is kept when
//   bits >= ceil(p * 2^16)      (i.e. uniform = bits / 2^16 >= p).
// Sixteen bits per element halve the generator's cost; they resolve p to 1/65536.
#pragma once

#include <math.h>

#include <cstdint>

#include "kernels/hd.h"

namespace mpiasr {

struct Philox4x32Block {
  uint32_t v[4];
};

// The round multipliers and the key increments (Weyl constants).
constexpr uint32_t kPhiloxM0 = 0xD2511F53u, kPhiloxM1 = 0xCD9E8D57u;
constexpr uint32_t kPhiloxW0 = 0x9E3779B9u, kPhiloxW1 = 0xBB67AE85u;

MPIASR_HD Philox4x32Block philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                        uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    const uint64_t p0 = uint64_t(kPhiloxM0) * c0;
    const uint64_t p1 = uint64_t(kPhiloxM1) * c2;
    const uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    const uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kPhiloxW0;
    k1 += kPhiloxW1;
  }
  return {{c0, c1, c2, c3}};
}

// Block `block` of the stream of `seed`.
MPIASR_HD Philox4x32Block philox_block(uint64_t seed, uint64_t block) {
  return philox4x32_10(uint32_t(block), uint32_t(block >> 32), 0u, 0u, uint32_t(seed),
                       uint32_t(seed >> 32));
}

constexpr int kDropoutElementsPerBlock = 8;

// The random bits of elements 8 block .. 8 block + 7 of the dropout stream of
// `seed` (one Philox call serves all eight).
MPIASR_HD void dropout_block_bits(uint64_t seed, uint64_t block, uint32_t bits[8]) {
  const Philox4x32Block values = philox_block(seed, block);
  for (int w = 0; w < 4; ++w) {
    bits[2 * w] = values.v[w] & 0xffffu;
    bits[2 * w + 1] = values.v[w] >> 16;
  }
}

// The 16 random bits of element `index` of the dropout stream of `seed`.
MPIASR_HD uint32_t dropout_bits(uint64_t seed, uint64_t index) {
  const Philox4x32Block block = philox_block(seed, index / kDropoutElementsPerBlock);
  const uint32_t word = block.v[(index / 2) % 4];
  return index % 2 ? word >> 16 : word & 0xffffu;
}

// Elements whose bits are at least this are kept (0 keeps all, 65536 none).
MPIASR_HD uint32_t dropout_threshold(float p) {
  return uint32_t(ceilf(p * 65536.0f));
}

MPIASR_HD bool dropout_keep(uint64_t seed, uint64_t index, float p) {
  return dropout_bits(seed, index) >= dropout_threshold(p);
}

}  // namespace mpiasr
