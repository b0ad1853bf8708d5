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
// Element stream: value i of seed s is word (i mod 4) of the block with
// counter (i / 4 as two 32-bit words, 0, 0) and key (s as two 32-bit words).
// Dropout keeps element i when uniform(value) >= p, uniform = top 24 bits / 2^24.
#pragma once

#include <cstdint>

#include "kernels/hd.h"

namespace mpiasr {

struct Philox4x32Block {
  uint32_t v[4];
};

MPIASR_HD Philox4x32Block philox4x32_10(uint32_t c0, uint32_t c1, uint32_t c2, uint32_t c3,
                                        uint32_t k0, uint32_t k1) {
  constexpr uint32_t kM0 = 0xD2511F53u, kM1 = 0xCD9E8D57u;
  constexpr uint32_t kW0 = 0x9E3779B9u, kW1 = 0xBB67AE85u;
  for (int round = 0; round < 10; ++round) {
    uint64_t p0 = uint64_t(kM0) * c0;
    uint64_t p1 = uint64_t(kM1) * c2;
    uint32_t hi0 = uint32_t(p0 >> 32), lo0 = uint32_t(p0);
    uint32_t hi1 = uint32_t(p1 >> 32), lo1 = uint32_t(p1);
    c0 = hi1 ^ c1 ^ k0;
    c1 = lo1;
    c2 = hi0 ^ c3 ^ k1;
    c3 = lo0;
    k0 += kW0;
    k1 += kW1;
  }
  return {{c0, c1, c2, c3}};
}

// The four values of block `block` (elements 4*block .. 4*block+3) of stream `seed`.
MPIASR_HD Philox4x32Block philox_block(uint64_t seed, uint64_t block) {
  return philox4x32_10(uint32_t(block), uint32_t(block >> 32), 0u, 0u, uint32_t(seed),
                       uint32_t(seed >> 32));
}

// Value `index` of stream `seed`.
MPIASR_HD uint32_t philox_value(uint64_t seed, uint64_t index) {
  return philox_block(seed, index >> 2).v[index & 3];
}

// Uniform in [0, 1) from the top 24 bits: exact in float on every device.
MPIASR_HD float philox_uniform(uint32_t value) {
  return float(value >> 8) * (1.0f / 16777216.0f);
}

// Dropout decision for element `index` of stream `seed` with drop probability p.
MPIASR_HD bool dropout_keep(uint64_t seed, uint64_t index, float p) {
  return philox_uniform(philox_value(seed, index)) >= p;
}

}  // namespace mpiasr
