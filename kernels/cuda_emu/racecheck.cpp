// racecheck's rules and its shadow cells (see racecheck.h): an access is
// compared with the last write and the last read of each byte it touches,
// then recorded in their place.
#include "kernels/cuda_emu/racecheck.h"

#include <sys/mman.h>

#include <string>

#include "kernels/cuda_emu/simt.h"
#include "src/base/error.h"

namespace mpiasr::emu::detail {

namespace {

// An access in 64 bits: the block's serial (bits 32-63, never 0), the thread
// (22-31), two flags (20-21) and the thread's clock (0-19).
constexpr int kFlagsShift = 20, kThreadShift = 22, kBlockShift = 32;
// The flag of a write; the flags of a read.
constexpr uint32_t kAtomic = 1;
constexpr uint32_t kReadBySeveralBlocks = 1, kReadBySeveralWarps = 2;

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
  const bool same_warp = a.thread / 32 == view.thread / 32;
  return same_warp && view.clocks[a.thread % 32] >= a.clock ? Order::kBefore : Order::kUnordered;
}

bool races(Order order) {
  return order == Order::kUnordered || order == Order::kOtherBlock;
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
  if (a.thread / 32 != view.thread / 32) return "no __syncthreads between them";
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

}  // namespace

// Not instrumented (it is called for every access to shared and device memory).
__attribute__((no_sanitize_address)) void check_race(const RaceView& view, RaceCell* cells,
                                                     size_t offset, size_t n, AccessKind kind,
                                                     bool shared, size_t memory_bytes) {
  const uint32_t clock = view.clocks[view.thread % 32];
  const uint64_t mine =
      pack({view.block, view.thread, kind == AccessKind::kAtomic ? kAtomic : 0, clock});
  // Neighbouring bytes mostly hold what the previous one held: then they
  // pass as it did and get what it got.
  uint64_t last_write = 0, last_read = 0, next_write = 0, next_read = 0;
  for (size_t i = 0; i < n; ++i) {
    RaceCell& cell = cells[offset + i];
    const uint64_t write_bits = __atomic_load_n(&cell.write, __ATOMIC_RELAXED);
    const uint64_t read_bits = __atomic_load_n(&cell.read, __ATOMIC_RELAXED);
    if (i == 0 || write_bits != last_write || read_bits != last_read) {
      last_write = write_bits;
      last_read = read_bits;
      next_write = write_bits;
      next_read = read_bits;
      const Access write = unpack(write_bits), read = unpack(read_bits);
      const Order after_write = order(write_bits, view, shared);
      const bool both_atomic = kind == AccessKind::kAtomic && (write.flags & kAtomic);
      if (races(after_write) && !both_atomic) {
        report(view, kind, n, offset, shared, memory_bytes,
               earlier_access(write.flags & kAtomic ? AccessKind::kAtomic : AccessKind::kWrite,
                              write, after_write, view));
      }
      const Order after_read = order(read_bits, view, shared);
      if (kind == AccessKind::kRead) {
        // Keep this read, and whether threads of several blocks, or of several
        // warps since the last __syncthreads, read the byte.
        uint32_t flags = 0;
        if (after_read == Order::kOtherBlock) flags = kReadBySeveralBlocks;
        if (after_read == Order::kBefore) {
          flags = read.flags & (read.clock >= view.interval ? 3u : kReadBySeveralBlocks);
        }
        if (after_read == Order::kUnordered) {
          flags = read.flags | (read.thread / 32 != view.thread / 32 ? kReadBySeveralWarps : 0u);
        }
        next_read = mine | uint64_t(flags) << kFlagsShift;
      } else {
        if (races(after_read)) {
          report(view, kind, n, offset, shared, memory_bytes,
                 earlier_access(AccessKind::kRead, read, after_read, view));
        }
        if (after_read == Order::kBefore && (read.flags & kReadBySeveralBlocks)) {
          report(view, kind, n, offset, shared, memory_bytes,
                 "reads by threads of several blocks, the last " + who(read, view) +
                     ": blocks of one launch are not ordered");
        }
        if (after_read == Order::kBefore && (read.flags & kReadBySeveralWarps) &&
            read.clock >= view.interval) {
          report(view, kind, n, offset, shared, memory_bytes,
                 "reads by threads of several warps, the last " + who(read, view) +
                     ": no __syncthreads between them");
        }
        next_write = mine;
        if (kind == AccessKind::kWrite) next_read = 0;
      }
    }
    if (next_write != write_bits) __atomic_store_n(&cell.write, next_write, __ATOMIC_RELAXED);
    if (next_read != read_bits) __atomic_store_n(&cell.read, next_read, __ATOMIC_RELAXED);
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
