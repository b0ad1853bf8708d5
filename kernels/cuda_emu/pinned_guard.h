// Host accesses of pinned memory while a copy into or out of it is queued,
// for the emulation build: what a GPU's copy engine turns into a race
// (the host reads bytes the copy has not written yet, or overwrites bytes
// it has not read yet) is reported here instead.
//
// While a copy is pending, the whole pages of pinned memory it reads are
// made read-only and those it writes inaccessible (mprotect); a host access
// that faults there prints what it did (read or write), the address, its
// offset in the pinned allocation and the pending copy, and ends the process
// with ExitCode::kFailure. Faults anywhere else go to the handler installed
// before.
//
// Missed: bytes on a page the copy covers only in part (a page is guarded
// only when the copy spans all of it; a pinned allocation's own slack after
// its last byte counts as spanned), accesses by system calls (read(2) into
// a guarded page fails with EFAULT instead), and copies beyond the first
// kMaxGuards pending at once.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mpiasr::emu::detail {

constexpr int kMaxGuards = 256;

// Guards the pages of [ptr, ptr + bytes), which lies in the pinned
// allocation [base, base + base_bytes) (page-aligned, its slack to the page
// end its own): read-only when the pending copy reads them, inaccessible
// when it writes them. `copy` says what the copy is (kept, at most 127
// characters). Returns the guard's number, or -1 when no whole page is
// covered or kMaxGuards are taken.
int guard_pinned(const void* ptr, size_t bytes, const void* base, size_t base_bytes,
                 bool copy_writes, const char* copy);
// The copy runs: its pages are opened for it (also where another pending
// copy guards them).
void open_guard(int guard);
// The copy is done: its pages get what the guards still pending ask.
void release_guard(int guard);

}  // namespace mpiasr::emu::detail
