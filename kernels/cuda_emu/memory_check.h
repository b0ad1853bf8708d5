// Checks of device memory for the emulation build: what compute-sanitizer's
// initcheck and racecheck do on a GPU.
//
// Fresh device memory (each cudaMalloc up to kFilledAllocationBytes, and each
// device-arena allocation as it is handed out) is filled with 0xFF bytes,
// NaN in every float type and -1 in integers, so a read of memory no one
// wrote gives a value no correct result contains, never zeros or the stale
// data of a previous owner.
//
// initcheck (the variable MPIASR_EMU_INITCHECK=1, or set_initcheck): every
// device allocation made while it is on gets a bitmap of the bytes written
// (by kernels, copies, memsets, cuBLASLt and the emulated NCCL's
// collectives); a kernel that reads a byte never written fails its launch
// with the kernel's name, the offset and the size of the allocation.
// kernels/cuda is compiled with every load and store a call (GCC's
// ThreadSanitizer instrumentation, without its runtime), answered here: the
// access is checked against AddressSanitizer's shadow as inline
// instrumentation would, then against the bitmap.
//
// racecheck (the variable MPIASR_EMU_RACECHECK=1, or set_racecheck): every
// load, store and atomic of a kernel in shared memory, and in the device
// allocations made while it is on, is checked against the shadow of the
// bytes it touches (racecheck.h); a race fails the launch.
#pragma once

#include <cstddef>

namespace mpiasr::emu {

// cudaMalloc fills allocations up to this size with the pattern; larger ones
// (the device arena's one allocation) are filled a range at a time as the
// arena hands them out.
constexpr size_t kFilledAllocationBytes = size_t(256) << 20;
constexpr unsigned char kUnwrittenFill = 0xFF;

bool initcheck_enabled();
// Applies to allocations made after the call.
void set_initcheck(bool enabled);

bool racecheck_enabled();
// Applies to launches, and to allocations, made after the call.
void set_racecheck(bool enabled);

namespace detail {
// A device allocation begins or ends (cudaMalloc, cudaFree).
void track_allocation(void* base, size_t bytes);
void untrack_allocation(void* base);
// [ptr, ptr + bytes) is handed out afresh (the device arena): filled with the
// pattern and, under initcheck, never written.
void fresh_device_range(void* ptr, size_t bytes);
// [ptr, ptr + bytes) was written by a copy, a memset, cuBLASLt or a collective
// of the emulated NCCL.
void mark_written(const void* ptr, size_t bytes);
}  // namespace detail

}  // namespace mpiasr::emu
