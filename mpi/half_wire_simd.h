// The loops of half_wire.cpp, compiled once per instruction-set level
// (kernels/cpu/simd_levels.h): the bf16 and fp16 casts, one value at a time
// (the fp16 ones also take the tails of the F16C loops).

void round_to_bf16(uint16_t* wire, float* values, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    wire[i] = float_to_bfloat16_bits(values[i]);
    values[i] = bfloat16_bits_to_float(wire[i]);
  }
}

void from_bf16(float* values, const uint16_t* wire, size_t n, bool add) {
  if (add) {
    for (size_t i = 0; i < n; ++i) values[i] += bfloat16_bits_to_float(wire[i]);
  } else {
    for (size_t i = 0; i < n; ++i) values[i] = bfloat16_bits_to_float(wire[i]);
  }
}

void round_to_fp16(_Float16* wire, float* values, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    wire[i] = static_cast<_Float16>(values[i]);
    values[i] = static_cast<float>(wire[i]);
  }
}

void from_fp16(float* values, const _Float16* wire, size_t n, bool add) {
  if (add) {
    for (size_t i = 0; i < n; ++i) values[i] += static_cast<float>(wire[i]);
  } else {
    for (size_t i = 0; i < n; ++i) values[i] = static_cast<float>(wire[i]);
  }
}
