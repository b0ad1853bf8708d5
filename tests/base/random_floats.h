// Uniform random floats for the kernels' tests (tests/kernels, tests/cuda).
#pragma once

#include <cstdint>
#include <random>
#include <vector>

namespace mpiasr::testing {

// n floats drawn uniformly from [lo, hi) by a 64-bit Mersenne Twister seeded
// with seed: the same values on every machine for one seed.
inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

}  // namespace mpiasr::testing
