// racecheck for the emulation build: what compute-sanitizer's racecheck does
// on a GPU for shared memory, and the same for global memory, within a block
// and between the blocks of a launch (the variable MPIASR_EMU_RACECHECK=1, or
// set_racecheck in memory_check.h).
//
// Every byte of a block's shared memory, and of each device allocation made
// while racecheck is on, has a shadow cell: the last write to it, and the
// last read since that write, each as (block, thread, clock). A thread's
// clock counts the synchronization points its block has passed: at each
// __syncthreads every clock of the block jumps past all earlier ones, and a
// warp collective (shuffle, vote, __syncwarp, wmma call) joins what the lanes
// of its mask know of each other's clocks (a vector clock over the 32 lanes
// of the warp), then advances each lane's own. Two accesses to one byte are
// ordered when
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
// What a cell forgets: of several reads of one byte since its last write, it
// keeps the last, and whether threads of several blocks, or of several warps
// of one block since its last __syncthreads, read it; so a read by another lane
// of the same warp as the last reader, with no collective between them, is
// forgotten. Global memory's cells are updated without locks: two blocks on the
// emulator's two OS threads touching one byte at the same instant may lose one
// of the two records, not report a race that is not one.
#pragma once

#include <cstddef>
#include <cstdint>

namespace mpiasr::emu::detail {

// The shadow of one byte: the last write and the last read, in the encoding
// of racecheck.cpp (0 when none).
struct RaceCell {
  uint64_t write = 0;
  uint64_t read = 0;
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
