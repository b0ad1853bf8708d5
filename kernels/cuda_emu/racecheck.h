// racecheck for the emulation build: what compute-sanitizer's racecheck does
// on a GPU for shared memory, and the same for global memory, within a block
// and between the blocks of a launch (the variable MPIASR_EMU_RACECHECK=1, or
// set_racecheck in memory_check.h).
//
// Every byte of a block's shared memory, and of each device allocation made
// while racecheck is on, has a shadow cell: the last write to it, and the
// reads since that write that a later write may race with, each as (block,
// thread, clock). A thread's clock counts the synchronization points its
// block has passed: at each __syncthreads every clock of the block jumps past
// all earlier ones, and a warp collective (shuffle, vote, __syncwarp, wmma
// call) joins what the lanes of its mask know of each other's clocks (a
// vector clock over the 32 lanes of the warp), then advances each lane's own.
// Two accesses to one byte are ordered when
//   - one thread made both, or
//   - a __syncthreads of their block lies between them, or
//   - their threads are lanes of one warp and warp collectives over masks
//     holding both lanes lead from the first to the second;
// accesses by different blocks of one launch are never ordered, and those of
// different launches always are (stream order). Two accesses that are not
// ordered race when one of them writes (an atomic counts as a write), unless
// both are atomics. The second access of a race fails the launch, naming the
// kernel, both threads (block and thread), both kinds of access, the memory
// (shared, or a device allocation and its size) and the offset.
//
// What a cell keeps of the reads since the last write: the last read and,
// with it, the other lanes of the last reader's warp whose reads it is not
// ordered after (under one clock, the smallest of theirs); one reader of
// another warp since the last __syncthreads; and whether threads of another
// block of the launch read the byte. That is enough to compare a write with
// every read nothing orders before it: once two warps have read a byte since
// the last __syncthreads, every write before the next one races with a read
// of a warp other than its own, and the cell names a reader of each of two
// warps; a write by a lane of the last reader's warp is compared with each
// kept lane's read. Lanes of one warp that read between the same two
// collectives over the whole warp read at one clock, so there the check is
// exact; after collectives over part of a warp, lanes that read at different
// clocks share the smallest, and a write ordered after the earliest of those
// reads but not after a later one goes unreported (a race is never reported
// where there is none). Of the writes, the last alone is kept: after atomics
// by several threads, a read is compared with the last. Global memory's cells
// are updated without locks: two blocks on the emulator's two OS threads
// touching one byte at the same instant may lose one of the two records, or
// mix them (a race then goes unreported, or is reported with the wrong
// reader), not report a race that is not one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mpiasr::emu::detail {

// The shadow of one byte, in the encoding of racecheck.cpp (0 when none):
// the last write; the last read since it, with the smallest clock of the
// reads `lanes` keeps; the lanes of the last reader's warp whose reads are
// kept; 1 + a thread of another warp that read since the last __syncthreads.
struct RaceCell {
  uint64_t write = 0;
  uint64_t read = 0;
  uint32_t lanes = 0;
  uint32_t other = 0;
};

enum class AccessKind : uint8_t { kRead, kWrite, kAtomic };

// The running CUDA thread as racecheck sees it (kept by simt.cpp).
struct RaceView {
  uint32_t block = 0;        // the block's serial: the launch's first + the block's linear index
  uint32_t first_block = 0;  // the serial of the launch's block 0
  uint32_t thread = 0;       // the thread's linear index in its block
  uint32_t interval = 0;     // the clock every thread got at the block's last __syncthreads
  const uint32_t* clocks = nullptr;  // [32]: what the thread knows of each lane of its warp's clock
  unsigned grid_x = 1, grid_y = 1, block_x = 1, block_y = 1;
  unsigned char* shared = nullptr;  // the block's shared memory
  size_t shared_bytes = 0;
  RaceCell* shared_cells = nullptr;
  const char* stack = nullptr;  // the running thread's fiber stack, which no other thread reads
  size_t stack_bytes = 0;
};

// The view of the thread running on this OS thread (simt.cpp), null outside
// a kernel or in a launch made without racecheck.
extern thread_local constinit const RaceView* running_race_view;

// The largest clock a cell holds: a block that passes more synchronization
// points fails.
constexpr uint32_t kMaxRaceClock = (uint32_t(1) << 20) - 1;

// Checks the access of `n` bytes at `offset` of a memory space of
// `memory_bytes` whose shadow is `cells` (the block's shared memory, or a
// device allocation) against what the cells hold, and records it; fails the
// kernel on a race.
void check_race(const RaceView& view, RaceCell* cells, size_t offset, size_t n, AccessKind kind,
                bool shared, size_t memory_bytes);

// Shadow cells for `bytes` bytes of memory, zero (no access), mapped as they
// are first touched; and their release.
RaceCell* map_race_cells(size_t bytes);
void unmap_race_cells(RaceCell* cells, size_t bytes);

}  // namespace mpiasr::emu::detail
