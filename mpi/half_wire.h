// The 16-bit message formats of the MPI gradient all-reduce
// (distributed.allreduce_dtype bf16 or fp16; mpi/gradient_reducer.h), and the
// casts its communication thread makes around each message, over n values:
//   round_to_wire:  wire[i] = half(values[i]), rounded to nearest even, and
//                   values[i] = float(wire[i]): the sender keeps what it sent,
//                   so every rank ends a step with the same sums
//   add_from_wire:  values[i] += float(wire[i])   (the sum stays fp32)
//   copy_from_wire: values[i] = float(wire[i])
// bf16 is the upper half of an fp32 (kernels/bfloat16.h): fp32's range at 8
// significant bits. fp16 is IEEE binary16: 11 significant bits, finite up to
// 65504; a larger value becomes infinite (and the step is skipped as for any
// non-finite gradient). NaN stays NaN in both.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mpiasr::mpi {

enum class HalfWire { kBf16, kFp16 };

void round_to_wire(HalfWire format, uint16_t* wire, float* values, size_t n);
void add_from_wire(HalfWire format, float* values, const uint16_t* wire, size_t n);
void copy_from_wire(HalfWire format, float* values, const uint16_t* wire, size_t n);

}  // namespace mpiasr::mpi
