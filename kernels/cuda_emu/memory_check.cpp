// Device memory checks (see memory_check.h): the fill pattern, initcheck's
// bitmaps of written bytes, racecheck's shadow of device allocations, and the
// access hooks kernels/cuda's instrumentation calls for every load and store.
#include "kernels/cuda_emu/memory_check.h"

#include <sanitizer/asan_interface.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <string>

#include "kernels/cuda_emu/racecheck.h"
#include "kernels/cuda_emu/simt.h"
#include "src/base/error.h"

namespace mpiasr::emu {

namespace {

constexpr const char* kInitcheckVariable = "MPIASR_EMU_INITCHECK";
constexpr const char* kRacecheckVariable = "MPIASR_EMU_RACECHECK";

// A device allocation under initcheck, racecheck or both: bit i of `written`
// is set once its byte i has been written; races[i] is the shadow of byte i.
struct Tracked {
  size_t bytes = 0;
  std::atomic<uint64_t>* written = nullptr;  // (bytes + 63) / 64 words, mapped on first touch
  size_t map_bytes = 0;
  detail::RaceCell* races = nullptr;  // `bytes` cells, mapped on first touch
};

struct Registry {
  std::shared_mutex mutex;
  std::map<const char*, Tracked> allocations;  // base -> bitmap
  std::atomic<uint64_t> generation{1};         // changes with every track and untrack
};

Registry& registry() {
  static Registry instance;
  return instance;
}

bool switch_from_environment(const char* variable) {
  const char* value = std::getenv(variable);
  if (!value || !*value || std::strcmp(value, "0") == 0) return false;
  if (std::strcmp(value, "1") == 0) return true;
  MPIASR_FAIL(ExitCode::kUsage, variable << "=" << value << " is neither 0 nor 1");
}

std::atomic<bool>& initcheck_setting() {
  static std::atomic<bool> enabled{switch_from_environment(kInitcheckVariable)};
  return enabled;
}

std::atomic<bool>& racecheck_setting() {
  static std::atomic<bool> enabled{switch_from_environment(kRacecheckVariable)};
  return enabled;
}

std::atomic<bool> any_tracked{false};
// Whether an access may need more than AddressSanitizer's check: an
// allocation is tracked, or racecheck is on (read with one relaxed load).
bool deep_checks = false;

void need_deep_checks() {
  __atomic_store_n(&deep_checks, true, __ATOMIC_RELAXED);
}

// The tracked allocation holding [p, p + n), as last found by this OS thread,
// and the last two ranges found to hold none (fiber stacks, host memory).
struct Found {
  const char* base = nullptr;
  Tracked* tracked = nullptr;
  uint64_t generation = 0;
};
struct Gap {
  uintptr_t begin = 0, end = 0;
  uint64_t generation = 0;
};
thread_local Found last_found;
thread_local Gap last_gaps[2];  // the last two found, the newest first

void remember_gap(const Gap& gap) {
  last_gaps[1] = last_gaps[0];
  last_gaps[0] = gap;
}

// find() past its caches: the registry under its lock.
__attribute__((noinline)) Found find_in_registry(const char* p, size_t n, uint64_t generation) {
  Registry& r = registry();
  std::shared_lock lock(r.mutex);
  auto it = r.allocations.upper_bound(p);
  const uintptr_t next = it == r.allocations.end() ? UINTPTR_MAX : uintptr_t(it->first);
  if (it != r.allocations.begin()) {
    --it;
    if (size_t(p - it->first) < it->second.bytes) {
      if (size_t(p - it->first) + n > it->second.bytes) return {};
      last_found = {it->first, &it->second, generation};
      return last_found;
    }
    remember_gap({uintptr_t(it->first) + it->second.bytes, next, generation});
  } else {
    remember_gap({0, next, generation});
  }
  return {};
}

// Called for most accesses, so not instrumented itself (its frame would be).
__attribute__((no_sanitize_address)) Found find(const void* ptr, size_t n) {
  const char* p = static_cast<const char*>(ptr);
  const uint64_t generation = registry().generation.load(std::memory_order_acquire);
  const Found& last = last_found;
  if (last.generation == generation && last.tracked && p >= last.base &&
      size_t(p - last.base) + n <= last.tracked->bytes) {
    return last;
  }
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  for (const Gap& gap : last_gaps) {
    if (gap.generation == generation && address >= gap.begin && address < gap.end) return {};
  }
  return find_in_registry(p, n, generation);
}

// Calls apply(word, mask) for each word of bits [from, from + n) with the
// mask of those bits in it.
template <typename Apply>
void for_each_word(size_t from, size_t n, Apply apply) {
  for (size_t i = from; i < from + n;) {
    const size_t bit = i % 64, take = std::min<size_t>(64 - bit, from + n - i);
    apply(i / 64, (take == 64 ? ~uint64_t(0) : ((uint64_t(1) << take) - 1)) << bit);
    i += take;
  }
}

void set_bits(std::atomic<uint64_t>* words, size_t from, size_t n) {
  for_each_word(from, n, [&](size_t word, uint64_t mask) {
    words[word].fetch_or(mask, std::memory_order_relaxed);
  });
}

void clear_bits(std::atomic<uint64_t>* words, size_t from, size_t n) {
  for_each_word(from, n, [&](size_t word, uint64_t mask) {
    words[word].fetch_and(~mask, std::memory_order_relaxed);
  });
}

// The first of bits [from, from + n) not set, or from + n.
size_t first_unset(const std::atomic<uint64_t>* words, size_t from, size_t n) {
  for (size_t i = from; i < from + n; ++i) {
    if (!(words[i / 64].load(std::memory_order_relaxed) >> (i % 64) & 1u)) return i;
  }
  return from + n;
}

// AddressSanitizer's shadow on x86-64 Linux: one byte per 8 bytes of memory,
// 0 when all 8 may be accessed.
constexpr uintptr_t kShadowOffset = 0x7fff8000;

// Reads the shadow itself, which instrumentation must not check.
__attribute__((no_sanitize_address)) inline bool shadow_clear(uintptr_t address) {
  return *reinterpret_cast<const int8_t*>((address >> 3) + kShadowOffset) == 0;
}

using detail::AccessKind;

// initcheck's part of an access to [offset, offset + n) of a tracked allocation.
void check_written(const Tracked& tracked, size_t offset, size_t n, AccessKind kind) {
  if (kind != AccessKind::kWrite) {
    const size_t unset = first_unset(tracked.written, offset, n);
    if (unset < offset + n) {
      detail::fail_kernel("initcheck: a read of " + std::to_string(n) + " bytes at offset " +
                          std::to_string(offset) + " of a device allocation of " +
                          std::to_string(tracked.bytes) + " bytes, whose byte " +
                          std::to_string(unset) + " was never written");
    }
  }
  if (kind != AccessKind::kRead) set_bits(tracked.written, offset, n);
}

// initcheck's and racecheck's part of an access to [p, p + n) by a kernel.
__attribute__((noinline, no_sanitize_address)) void check_kernel_access(const void* p, size_t n,
                                                                        AccessKind kind) {
  const detail::RaceView* view = detail::running_race_view;
  const unsigned char* byte = static_cast<const unsigned char*>(p);
  if (view) {
    if (byte >= view->shared && byte < view->shared + view->shared_bytes) {
      detail::check_race(*view, view->shared_cells, size_t(byte - view->shared), n, kind, true,
                         view->shared_bytes);
      return;
    }
    const char* address = static_cast<const char*>(p);
    if (address >= view->stack && address < view->stack + view->stack_bytes) return;
  } else if (!detail::in_kernel()) {
    return;
  }
  const Found found = find(p, n);
  if (!found.tracked) return;
  const size_t offset = size_t(static_cast<const char*>(p) - found.base);
  if (found.tracked->written) check_written(*found.tracked, offset, n, kind);
  if (view && found.tracked->races) {
    detail::check_race(*view, found.tracked->races, offset, n, kind, false, found.tracked->bytes);
  }
}

// One load or store of `n` bytes at `p` by instrumented code (from `pc`):
// every access of the kernels comes here, so the common case (shadow clear,
// nothing tracked) is a few instructions, not instrumented itself.
__attribute__((no_sanitize_address)) inline void check_access(const void* p, size_t n,
                                                              AccessKind kind, void* pc) {
  const uintptr_t first = reinterpret_cast<uintptr_t>(p), last = first + n - 1;
  const bool clear = n <= 16 && shadow_clear(first) && shadow_clear(last) &&
                     (last - first < 8 || shadow_clear(first + 8));
  void* address = const_cast<void*>(p);
  if (!clear && __asan_region_is_poisoned(address, n)) {
    void* frame = __builtin_frame_address(0);
    __asan_report_error(pc, frame, frame, address, kind != AccessKind::kRead, n);
  }
  if (__atomic_load_n(&deep_checks, __ATOMIC_RELAXED)) check_kernel_access(p, n, kind);
}

}  // namespace

bool initcheck_enabled() {
  return initcheck_setting();
}

void set_initcheck(bool enabled) {
  initcheck_setting() = enabled;
}

bool racecheck_enabled() {
  const bool enabled = racecheck_setting();
  if (enabled) need_deep_checks();
  return enabled;
}

void set_racecheck(bool enabled) {
  racecheck_setting() = enabled;
  if (enabled) need_deep_checks();
}

namespace detail {

void track_allocation(void* base, size_t bytes) {
  if (bytes <= kFilledAllocationBytes) std::memset(base, kUnwrittenFill, bytes);
  if (!initcheck_enabled() && !racecheck_enabled()) return;
  Tracked tracked;
  tracked.bytes = bytes;
  if (initcheck_enabled()) {
    tracked.map_bytes = (bytes + 63) / 64 * sizeof(uint64_t);
    void* words = mmap(nullptr, tracked.map_bytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (words == MAP_FAILED) {
      MPIASR_FAIL(
          ExitCode::kFailure,
          "initcheck: no memory for the bitmap of a device allocation of " << bytes << " bytes");
    }
    tracked.written = static_cast<std::atomic<uint64_t>*>(words);
  }
  if (racecheck_enabled()) tracked.races = detail::map_race_cells(bytes);
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  r.allocations[static_cast<const char*>(base)] = tracked;
  r.generation.fetch_add(1, std::memory_order_release);
  any_tracked = true;
  need_deep_checks();
}

void untrack_allocation(void* base) {
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  auto it = r.allocations.find(static_cast<const char*>(base));
  if (it == r.allocations.end()) return;
  if (it->second.written) munmap(it->second.written, it->second.map_bytes);
  if (it->second.races) detail::unmap_race_cells(it->second.races, it->second.bytes);
  r.allocations.erase(it);
  r.generation.fetch_add(1, std::memory_order_release);
}

void fresh_device_range(void* ptr, size_t bytes) {
  std::memset(ptr, kUnwrittenFill, bytes);
  if (!any_tracked) return;
  const Found found = find(ptr, bytes);
  if (found.tracked && found.tracked->written) {
    clear_bits(found.tracked->written, size_t(static_cast<const char*>(ptr) - found.base), bytes);
  }
}

void mark_written(const void* ptr, size_t bytes) {
  if (!any_tracked || bytes == 0) return;
  const Found found = find(ptr, bytes);
  if (found.tracked && found.tracked->written) {
    set_bits(found.tracked->written, size_t(static_cast<const char*>(ptr) - found.base), bytes);
  }
}

void atomic_access(void* address, size_t bytes) {
  check_access(address, bytes, AccessKind::kAtomic, __builtin_return_address(0));
}

}  // namespace detail

}  // namespace mpiasr::emu

// The calls GCC's ThreadSanitizer instrumentation makes for every load and
// store of kernels/cuda (see CMakeLists.txt, MPIASR_EMU_CHECKED_ACCESSES),
// answered without ThreadSanitizer's runtime: the accesses as above, and the
// atomics of the host code compiled with the kernels (the launch counters) as
// the compiler's builtins, sequentially consistent.
#define MPIASR_EMU_ACCESS_HOOKS(n)                                                          \
  extern "C" __attribute__((no_sanitize_address)) void __tsan_read##n(void* p) {            \
    mpiasr::emu::check_access(p, n, mpiasr::emu::detail::AccessKind::kRead,                 \
                              __builtin_return_address(0));                                 \
  }                                                                                         \
  extern "C" __attribute__((no_sanitize_address)) void __tsan_write##n(void* p) {           \
    mpiasr::emu::check_access(p, n, mpiasr::emu::detail::AccessKind::kWrite,                \
                              __builtin_return_address(0));                                 \
  }                                                                                         \
  extern "C" __attribute__((no_sanitize_address)) void __tsan_unaligned_read##n(void* p) {  \
    mpiasr::emu::check_access(p, n, mpiasr::emu::detail::AccessKind::kRead,                 \
                              __builtin_return_address(0));                                 \
  }                                                                                         \
  extern "C" __attribute__((no_sanitize_address)) void __tsan_unaligned_write##n(void* p) { \
    mpiasr::emu::check_access(p, n, mpiasr::emu::detail::AccessKind::kWrite,                \
                              __builtin_return_address(0));                                 \
  }
MPIASR_EMU_ACCESS_HOOKS(1)
MPIASR_EMU_ACCESS_HOOKS(2)
MPIASR_EMU_ACCESS_HOOKS(4)
MPIASR_EMU_ACCESS_HOOKS(8)
MPIASR_EMU_ACCESS_HOOKS(16)
#undef MPIASR_EMU_ACCESS_HOOKS

extern "C" __attribute__((no_sanitize_address)) void __tsan_read_range(void* p, long n) {
  if (n <= 0) return;
  mpiasr::emu::check_access(p, size_t(n), mpiasr::emu::detail::AccessKind::kRead,
                            __builtin_return_address(0));
}
extern "C" __attribute__((no_sanitize_address)) void __tsan_write_range(void* p, long n) {
  if (n <= 0) return;
  mpiasr::emu::check_access(p, size_t(n), mpiasr::emu::detail::AccessKind::kWrite,
                            __builtin_return_address(0));
}

// Nothing to set up, and no virtual calls to watch.
extern "C" void __tsan_init() {}
extern "C" void __tsan_vptr_update(void*, void*) {}

// Atomics on a T at `a`, in the types of GCC's built-in declarations.
#define MPIASR_EMU_ATOMIC_HOOKS(bits, T)                                                           \
  extern "C" T __tsan_atomic##bits##_load(const volatile void* a, int) {                           \
    return __atomic_load_n(static_cast<const volatile T*>(a), __ATOMIC_SEQ_CST);                   \
  }                                                                                                \
  extern "C" void __tsan_atomic##bits##_store(volatile void* a, T v, int) {                        \
    __atomic_store_n(static_cast<volatile T*>(a), v, __ATOMIC_SEQ_CST);                            \
  }                                                                                                \
  extern "C" T __tsan_atomic##bits##_fetch_add(volatile void* a, T v, int) {                       \
    return __atomic_fetch_add(static_cast<volatile T*>(a), v, __ATOMIC_SEQ_CST);                   \
  }                                                                                                \
  extern "C" T __tsan_atomic##bits##_fetch_sub(volatile void* a, T v, int) {                       \
    return __atomic_fetch_sub(static_cast<volatile T*>(a), v, __ATOMIC_SEQ_CST);                   \
  }                                                                                                \
  extern "C" bool __tsan_atomic##bits##_compare_exchange_weak(volatile void* a, void* e, T v, int, \
                                                              int) {                               \
    return __atomic_compare_exchange_n(static_cast<volatile T*>(a), static_cast<T*>(e), v, true,   \
                                       __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                        \
  }
MPIASR_EMU_ATOMIC_HOOKS(32, unsigned int)
MPIASR_EMU_ATOMIC_HOOKS(64, unsigned long)
#undef MPIASR_EMU_ATOMIC_HOOKS

extern "C" void __tsan_atomic_thread_fence(int) {
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
}
