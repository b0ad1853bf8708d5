// fp32 <-> bf16 / fp16 casts of the gradient all-reduce's 16-bit messages
// (see half_wire.h). bf16: plain loops of integer rounding on the bits,
// vectorized by the compiler (half_wire_simd.h, once per instruction-set
// level of kernels/cpu/simd.h). fp16: _Float16, which GCC converts one value
// at a time (F16C's scalar vcvtps2ph at the avx2 and avx512 levels); at those
// levels, 8 values at a time by the F16C intrinsics instead.
#include "mpi/half_wire.h"

#include "kernels/bfloat16.h"
#include "kernels/cpu/simd.h"

#if defined(__GNUC__) && defined(__x86_64__)
#include <immintrin.h>
#define MPIASR_F16C 1
#endif

static_assert(sizeof(_Float16) == sizeof(uint16_t));

#define MPIASR_SIMD_SOURCE "mpi/half_wire_simd.h"
#include "kernels/cpu/simd_levels.h"

namespace mpiasr::mpi {

namespace {

#ifdef MPIASR_F16C
// F16C is part of the avx2 level (x86-64-v3); at the generic level the
// casts stay baseline x86-64.
bool has_f16c() {
  return simd_level() >= SimdLevel::kAvx2;
}

// round_to_fp16 and from_fp16, 8 values at a time; the tail by them.
__attribute__((target("avx,f16c"))) void round_to_fp16_f16c(_Float16* wire, float* values,
                                                            size_t n) {
  const size_t whole = n / 8 * 8;
  for (size_t i = 0; i < whole; i += 8) {
    const __m128i half = _mm256_cvtps_ph(_mm256_loadu_ps(values + i), _MM_FROUND_TO_NEAREST_INT);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(wire + i), half);
    _mm256_storeu_ps(values + i, _mm256_cvtph_ps(half));
  }
  MPIASR_SIMD_CALL(round_to_fp16, wire + whole, values + whole, n - whole);
}

__attribute__((target("avx,f16c"))) void from_fp16_f16c(float* values, const _Float16* wire,
                                                        size_t n, bool add) {
  const size_t whole = n / 8 * 8;
  for (size_t i = 0; i < whole; i += 8) {
    __m256 received = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(wire + i)));
    if (add) received = _mm256_add_ps(_mm256_loadu_ps(values + i), received);
    _mm256_storeu_ps(values + i, received);
  }
  MPIASR_SIMD_CALL(from_fp16, values + whole, wire + whole, n - whole, add);
}
#endif

void to_fp16(_Float16* wire, float* values, size_t n) {
#ifdef MPIASR_F16C
  if (has_f16c()) return round_to_fp16_f16c(wire, values, n);
#endif
  MPIASR_SIMD_CALL(round_to_fp16, wire, values, n);
}

void from_fp16_any(float* values, const _Float16* wire, size_t n, bool add) {
#ifdef MPIASR_F16C
  if (has_f16c()) return from_fp16_f16c(values, wire, n, add);
#endif
  MPIASR_SIMD_CALL(from_fp16, values, wire, n, add);
}

// The wire buffers hold raw 16-bit patterns; fp16's loops read them as
// _Float16, which has the same size and binary16 layout.
_Float16* as_fp16(uint16_t* wire) {
  return reinterpret_cast<_Float16*>(wire);
}
const _Float16* as_fp16(const uint16_t* wire) {
  return reinterpret_cast<const _Float16*>(wire);
}

}  // namespace

void round_to_wire(HalfWire format, uint16_t* wire, float* values, size_t n) {
  if (format == HalfWire::kBf16) {
    MPIASR_SIMD_CALL(round_to_bf16, wire, values, n);
  } else {
    to_fp16(as_fp16(wire), values, n);
  }
}

void add_from_wire(HalfWire format, float* values, const uint16_t* wire, size_t n) {
  if (format == HalfWire::kBf16) {
    MPIASR_SIMD_CALL(from_bf16, values, wire, n, true);
  } else {
    from_fp16_any(values, as_fp16(wire), n, true);
  }
}

void copy_from_wire(HalfWire format, float* values, const uint16_t* wire, size_t n) {
  if (format == HalfWire::kBf16) {
    MPIASR_SIMD_CALL(from_bf16, values, wire, n, false);
  } else {
    from_fp16_any(values, as_fp16(wire), n, false);
  }
}

}  // namespace mpiasr::mpi
