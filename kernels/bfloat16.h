// bfloat16 as bits: the upper 16 bits of an IEEE binary32 (sign, 8 exponent
// bits, 7 fraction bits; fp32's range at 8 significant bits).
//   float_to_bfloat16_bits: round to nearest, ties to the even pattern (as
//     __float2bfloat16_rn); NaN stays a quiet NaN; a value beyond the largest
//     bfloat16 by half an ulp or more becomes infinite
//   bfloat16_bits_to_float: exact
// Used by the CUDA emulation's __nv_bfloat16 and by the MPI all-reduce's
// 16-bit messages (mpi/half_wire.h).
#pragma once

#include <cstdint>
#include <cstring>

namespace mpiasr {

inline uint16_t float_to_bfloat16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x0040u);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);  // round to nearest, ties to the even pattern
  return uint16_t(u >> 16);
}

inline float bfloat16_bits_to_float(uint16_t bits) {
  const uint32_t u = uint32_t(bits) << 16;
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace mpiasr
