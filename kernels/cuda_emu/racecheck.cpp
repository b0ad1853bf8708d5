// racecheck's rules and its shadow cells (see racecheck.h): an access is
// compared with the last write and the kept reads of each byte it touches,
// then recorded among them.
#include "kernels/cuda_emu/racecheck.h"

#include <sys/mman.h>

#include <algorithm>
#include <string>

#include "kernels/cuda_emu/simt.h"
#include "src/base/error.h"

namespace mpiasr::emu::detail {

namespace {

constexpr uint32_t kLanes = 32;

// An access in 64 bits: the block's serial (bits 32-63, never 0), the thread
// (22-31), two flags (20-21) and the thread's clock (0-19).
constexpr int kFlagsShift = 20, kThreadShift = 22, kBlockShift = 32;
// The flag of a write; the flag of a read.
constexpr uint32_t kAtomic = 1;
constexpr uint32_t kReadBySeveralBlocks = 1;

struct Access {
  uint32_t block, thread, flags, clock;
};

uint64_t pack(const Access& a) {
  return uint64_t(a.block) << kBlockShift | uint64_t(a.thread) << kThreadShift |
         uint64_t(a.flags) << kFlagsShift | a.clock;
}

Access unpack(uint64_t bits) {
  return {uint32_t(bits >> kBlockShift), uint32_t(bits >> kThreadShift) & 1023u,
          uint32_t(bits >> kFlagsShift) & 3u, uint32_t(bits) & kMaxRaceClock};
}

// A cell's fields as one access found them.
struct Shadow {
  uint64_t write, read;
  uint32_t lanes, other;
  bool operator==(const Shadow&) const = default;
};

Shadow load(const RaceCell& cell) {
  return {__atomic_load_n(&cell.write, __ATOMIC_RELAXED),
          __atomic_load_n(&cell.read, __ATOMIC_RELAXED),
          __atomic_load_n(&cell.lanes, __ATOMIC_RELAXED),
          __atomic_load_n(&cell.other, __ATOMIC_RELAXED)};
}

void store(RaceCell& cell, const Shadow& was, const Shadow& now) {
  if (now.write != was.write) __atomic_store_n(&cell.write, now.write, __ATOMIC_RELAXED);
  if (now.read != was.read) __atomic_store_n(&cell.read, now.read, __ATOMIC_RELAXED);
  if (now.lanes != was.lanes) __atomic_store_n(&cell.lanes, now.lanes, __ATOMIC_RELAXED);
  if (now.other != was.other) __atomic_store_n(&cell.other, now.other, __ATOMIC_RELAXED);
}

// How an earlier access stands to the running thread's access now.
enum class Order { kNone, kBefore, kUnordered, kOtherBlock };

Order order(uint64_t bits, const RaceView& view, bool shared) {
  if (bits == 0) return Order::kNone;
  const Access a = unpack(bits);
  if (a.block != view.block) {
    // Another block's shared memory, or an earlier launch: nothing to race with.
    return shared || a.block < view.first_block ? Order::kNone : Order::kOtherBlock;
  }
  if (a.thread == view.thread || a.clock < view.interval) return Order::kBefore;
  const bool same_warp = a.thread / kLanes == view.thread / kLanes;
  return same_warp && view.clocks[a.thread % kLanes] >= a.clock ? Order::kBefore
                                                                : Order::kUnordered;
}

bool races(Order order) {
  return order == Order::kUnordered || order == Order::kOtherBlock;
}

// Whether the running thread knows each lane of `lanes` (its own aside) up to
// `clock`: then it is ordered after their reads at that clock.
bool knows(const RaceView& view, uint32_t lanes, uint32_t clock) {
  lanes &= ~(1u << view.thread % kLanes);
  for (; lanes != 0; lanes &= lanes - 1) {
    if (view.clocks[__builtin_ctz(lanes)] < clock) return false;
  }
  return true;
}

// The cell after a read by the running thread at `clock`: this read, and the
// earlier ones it is not ordered after (see racecheck.h).
Shadow after_read(const Shadow& s, const RaceView& view, bool shared, uint32_t clock) {
  Shadow next = {s.write, 0, 1u << view.thread % kLanes, 0};
  uint32_t flags = 0;
  if (s.read != 0) {
    const Access last = unpack(s.read);
    if (last.block != view.block) {
      // Another block of this launch (another block's shared memory, or an
      // earlier launch, is forgotten).
      if (!shared && last.block >= view.first_block) flags = kReadBySeveralBlocks;
    } else {
      flags = last.flags;
      const bool since_barrier = last.clock >= view.interval;
      if (since_barrier && last.thread / kLanes != view.thread / kLanes) {
        next.other = last.thread + 1;
      } else if (since_barrier) {
        next.other = s.other;
        if (!knows(view, s.lanes, last.clock)) {
          next.lanes |= s.lanes;
          clock = std::min(clock, last.clock);
        }
      }
    }
  }
  next.read = pack({view.block, view.thread, flags, clock});
  return next;
}

// An access of `kind`, with its article.
const char* an(AccessKind kind) {
  switch (kind) {
    case AccessKind::kRead:
      return "a read";
    case AccessKind::kWrite:
      return "a write";
    case AccessKind::kAtomic:
      return "an atomic";
  }
  return "an access";
}

std::string coordinates(uint32_t linear, unsigned x, unsigned y) {
  return "(" + std::to_string(linear % x) + "," + std::to_string(linear / x % y) + "," +
         std::to_string(linear / (x * y)) + ")";
}

// The thread of an earlier access, with its block when that is another.
std::string who(const Access& a, const RaceView& view) {
  std::string text = "thread " + coordinates(a.thread, view.block_x, view.block_y);
  if (a.block == view.block) return text + " of this block";
  return text + " of block " + coordinates(a.block - view.first_block, view.grid_x, view.grid_y);
}

// The reason two accesses of one block are not ordered.
std::string unordered_because(const Access& a, const RaceView& view) {
  if (a.thread / kLanes != view.thread / kLanes) return "no __syncthreads between them";
  return "lanes of one warp with no __syncthreads or warp collective over both between them";
}

[[noreturn]] void report(const RaceView& view, AccessKind kind, size_t n, size_t offset,
                         bool shared, size_t memory_bytes, const std::string& earlier) {
  const std::string memory =
      shared ? "shared memory"
             : "a device allocation of " + std::to_string(memory_bytes) + " bytes";
  fail_kernel("racecheck: " + std::string(an(kind)) + " of " + std::to_string(n) +
              " bytes at offset " + std::to_string(offset) + " of " + memory + " races with " +
              earlier);
}

// The earlier access of a race and why it races with the running thread's.
std::string earlier_access(AccessKind kind, const Access& a, Order order, const RaceView& view) {
  const std::string text = std::string(an(kind)) + " by " + who(a, view) + ": ";
  if (order == Order::kOtherBlock) return text + "blocks of one launch are not ordered";
  return text + unordered_because(a, view);
}

// Why a write races with a read a cell keeps.
enum class ReadRace { kNone, kOtherBlock, kSeveralBlocks, kUnordered };

// Whether a write by the running thread races with a read `s` keeps, and
// with which (`reader`).
ReadRace racing_read(const Shadow& s, const RaceView& view, bool shared, Access* reader) {
  if (s.read == 0) return ReadRace::kNone;
  *reader = unpack(s.read);
  if (reader->block != view.block) {
    if (shared || reader->block < view.first_block) return ReadRace::kNone;
    return ReadRace::kOtherBlock;
  }
  if (reader->flags & kReadBySeveralBlocks) return ReadRace::kSeveralBlocks;
  if (reader->clock < view.interval) return ReadRace::kNone;
  const uint32_t warp = view.thread / kLanes;
  if (reader->thread / kLanes != warp) return ReadRace::kUnordered;
  if (s.other != 0) {
    reader->thread = s.other - 1;
    return ReadRace::kUnordered;
  }
  uint32_t lanes = s.lanes & ~(1u << view.thread % kLanes);
  for (; lanes != 0; lanes &= lanes - 1) {
    const uint32_t lane = uint32_t(__builtin_ctz(lanes));
    if (view.clocks[lane] >= reader->clock) continue;
    reader->thread = warp * kLanes + lane;
    return ReadRace::kUnordered;
  }
  return ReadRace::kNone;
}

// The read of a race found by racing_read, as a report names it.
std::string read_race_text(ReadRace race, const Access& reader, const RaceView& view) {
  if (race == ReadRace::kSeveralBlocks) {
    return "reads by threads of several blocks, the last " + who(reader, view) +
           ": blocks of one launch are not ordered";
  }
  const Order order = race == ReadRace::kOtherBlock ? Order::kOtherBlock : Order::kUnordered;
  return earlier_access(AccessKind::kRead, reader, order, view);
}

}  // namespace

// Not instrumented (it is called for every access to shared and device memory).
__attribute__((no_sanitize_address)) void check_race(const RaceView& view, RaceCell* cells,
                                                     size_t offset, size_t n, AccessKind kind,
                                                     bool shared, size_t memory_bytes) {
  const uint32_t clock = view.clocks[view.thread % kLanes];
  const uint64_t mine =
      pack({view.block, view.thread, kind == AccessKind::kAtomic ? kAtomic : 0, clock});
  // Neighbouring bytes mostly hold what the previous one held: then they
  // pass as it did and get what it got.
  Shadow seen = {}, next = {};
  for (size_t i = 0; i < n; ++i) {
    RaceCell& cell = cells[offset + i];
    const Shadow now = load(cell);
    if (i == 0 || now != seen) {
      seen = now;
      const Access write = unpack(now.write);
      const Order after_write = order(now.write, view, shared);
      const bool both_atomic = kind == AccessKind::kAtomic && (write.flags & kAtomic);
      if (races(after_write) && !both_atomic) {
        report(view, kind, n, offset, shared, memory_bytes,
               earlier_access(write.flags & kAtomic ? AccessKind::kAtomic : AccessKind::kWrite,
                              write, after_write, view));
      }
      if (kind == AccessKind::kRead) {
        next = after_read(now, view, shared, clock);
      } else {
        Access reader = {};
        const ReadRace race = racing_read(now, view, shared, &reader);
        if (race != ReadRace::kNone) {
          report(view, kind, n, offset, shared, memory_bytes, read_race_text(race, reader, view));
        }
        // A write is ordered after every read kept (or raced with one), and
        // so is whatever is ordered after it; an atomic keeps them.
        next = kind == AccessKind::kWrite ? Shadow{mine, 0, 0, 0}
                                          : Shadow{mine, now.read, now.lanes, now.other};
      }
    }
    store(cell, now, next);
  }
}

RaceCell* map_race_cells(size_t bytes) {
  void* cells = mmap(nullptr, bytes * sizeof(RaceCell), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (cells == MAP_FAILED) {
    MPIASR_FAIL(ExitCode::kFailure,
                "racecheck: no memory for the shadow of " << bytes << " bytes of device memory");
  }
  return static_cast<RaceCell*>(cells);
}

void unmap_race_cells(RaceCell* cells, size_t bytes) {
  munmap(cells, bytes * sizeof(RaceCell));
}

}  // namespace mpiasr::emu::detail
