// Seeded random numbers on the host: splitmix64 (Steele, Lea and Flood,
// "Fast splittable pseudorandom number generators", 2014), the one generator
// behind every seeded choice the program makes (shuffles, dither, SpecAugment
// seeds, dropout seeds, initial weights). Dropout masks themselves use the
// counter-based Philox of kernels/philox.h, which the GPU shares.
//
//   state_{i+1} = state_i + gamma                  gamma = 0x9E3779B97F4A7C15
//   output_i    = mix(state_{i+1})                 mix: xor-shift-multiply, bijective
//
// Everything here is a pure function of its arguments, the same on every
// machine and standard library (no std:: distributions), so a seed gives the
// same numbers everywhere.
#pragma once

#include <cstdint>
#include <initializer_list>

namespace mpiasr {

// The increment of the splitmix64 state (2^64 / golden ratio, odd).
constexpr uint64_t kSplitMix64Gamma = 0x9E3779B97F4A7C15ull;

// splitmix64's output function: a bijection of 64-bit values.
constexpr uint64_t splitmix64_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// The first output of a generator seeded with x: a 64-bit hash of x.
constexpr uint64_t splitmix64(uint64_t x) {
  return splitmix64_mix(x + kSplitMix64Gamma);
}

// A seed derived from several values, e.g. (seed ^ stream, epoch, utterance):
// splitmix64(... splitmix64(splitmix64(v0) ^ v1) ... ^ vn). Different values
// give independent-looking seeds; the same values always give the same seed.
constexpr uint64_t derive_seed(std::initializer_list<uint64_t> values) {
  uint64_t seed = 0;
  bool first = true;
  for (uint64_t value : values) {
    seed = splitmix64(first ? value : seed ^ value);
    first = false;
  }
  return seed;
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() { return splitmix64_mix(state_ += kSplitMix64Gamma); }

  // Uniform in [0, n), n >= 1, without modulo bias (the top partial range of
  // 64-bit values is rejected and drawn again).
  uint64_t below(uint64_t n) {
    const uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = next();
    while (x >= limit);
    return x % n;
  }

  // Output number `index` (0-based) of a generator seeded with `seed`, without
  // drawing the ones before it: a counter-based stream.
  static constexpr uint64_t at(uint64_t seed, uint64_t index) {
    return splitmix64_mix(seed + kSplitMix64Gamma * (index + 1));
  }

 private:
  uint64_t state_;
};

// The top 53 bits of a 64-bit value as a double in [0, 1).
constexpr double unit_double(uint64_t bits) {
  return double(bits >> 11) * 0x1.0p-53;
}

}  // namespace mpiasr
