// Device memory checks (see memory_check.h): the fill pattern, initcheck's
// bitmaps of written bytes, and the access hooks kernels/cuda's
// instrumentation calls for every load and store.
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

#include "kernels/cuda_emu/simt.h"
#include "src/base/error.h"

namespace mpiasr::emu {

namespace {

constexpr const char* kInitcheckVariable = "MPIASR_EMU_INITCHECK";

// A device allocation under initcheck: bit i of `written` is set once its
// byte i has been written.
struct Tracked {
  size_t bytes = 0;
  std::atomic<uint64_t>* written = nullptr;  // (bytes + 63) / 64 words, mapped on first touch
  size_t map_bytes = 0;
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

bool initcheck_from_environment() {
  const char* value = std::getenv(kInitcheckVariable);
  if (!value || !*value || std::strcmp(value, "0") == 0) return false;
  if (std::strcmp(value, "1") == 0) return true;
  MPIASR_FAIL(ExitCode::kUsage, kInitcheckVariable << "=" << value << " is neither 0 nor 1");
}

std::atomic<bool>& initcheck_setting() {
  static std::atomic<bool> enabled{initcheck_from_environment()};
  return enabled;
}

std::atomic<bool> any_tracked{false};

// The tracked allocation holding [p, p + n), as last found by this OS thread,
// and the last range found to hold none (fiber stacks, host memory).
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
thread_local Gap last_gap;

Found find(const void* ptr, size_t n) {
  const char* p = static_cast<const char*>(ptr);
  Registry& r = registry();
  const uint64_t generation = r.generation.load(std::memory_order_acquire);
  const Found& last = last_found;
  if (last.generation == generation && last.tracked && p >= last.base &&
      size_t(p - last.base) + n <= last.tracked->bytes) {
    return last;
  }
  const uintptr_t address = reinterpret_cast<uintptr_t>(p);
  if (last_gap.generation == generation && address >= last_gap.begin && address < last_gap.end) {
    return {};
  }
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
    last_gap = {uintptr_t(it->first) + it->second.bytes, next, generation};
  } else {
    last_gap = {0, next, generation};
  }
  return {};
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

// initcheck's part of an access to [p, p + n).
__attribute__((noinline)) void check_written(const void* p, size_t n, bool write) {
  if (!detail::in_kernel()) return;
  const Found found = find(p, n);
  if (!found.tracked) return;
  const size_t offset = size_t(static_cast<const char*>(p) - found.base);
  if (write) {
    set_bits(found.tracked->written, offset, n);
    return;
  }
  const size_t unset = first_unset(found.tracked->written, offset, n);
  if (unset < offset + n) {
    detail::fail_kernel("initcheck: a read of " + std::to_string(n) + " bytes at offset " +
                        std::to_string(offset) + " of a device allocation of " +
                        std::to_string(found.tracked->bytes) + " bytes, whose byte " +
                        std::to_string(unset) + " was never written");
  }
}

// One load or store of `n` bytes at `p` by instrumented code (from `pc`):
// every access of the kernels comes here, so the common case (shadow clear,
// nothing tracked) is a few instructions, not instrumented itself.
__attribute__((no_sanitize_address)) inline void check_access(const void* p, size_t n, bool write,
                                                              void* pc) {
  const uintptr_t first = reinterpret_cast<uintptr_t>(p), last = first + n - 1;
  const bool clear = n <= 16 && shadow_clear(first) && shadow_clear(last) &&
                     (last - first < 8 || shadow_clear(first + 8));
  void* address = const_cast<void*>(p);
  if (!clear && __asan_region_is_poisoned(address, n)) {
    void* frame = __builtin_frame_address(0);
    __asan_report_error(pc, frame, frame, address, write, n);
  }
  if (any_tracked.load(std::memory_order_relaxed)) check_written(p, n, write);
}

}  // namespace

bool initcheck_enabled() {
  return initcheck_setting();
}

void set_initcheck(bool enabled) {
  initcheck_setting() = enabled;
}

namespace detail {

void track_allocation(void* base, size_t bytes) {
  if (bytes <= kFilledAllocationBytes) std::memset(base, kUnwrittenFill, bytes);
  if (!initcheck_enabled()) return;
  Tracked tracked;
  tracked.bytes = bytes;
  tracked.map_bytes = (bytes + 63) / 64 * sizeof(uint64_t);
  void* words = mmap(nullptr, tracked.map_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (words == MAP_FAILED) {
    MPIASR_FAIL(ExitCode::kFailure, "initcheck: no memory for the bitmap of a device allocation of "
                                        << bytes << " bytes");
  }
  tracked.written = static_cast<std::atomic<uint64_t>*>(words);
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  r.allocations[static_cast<const char*>(base)] = tracked;
  r.generation.fetch_add(1, std::memory_order_release);
  any_tracked = true;
}

void untrack_allocation(void* base) {
  Registry& r = registry();
  std::unique_lock lock(r.mutex);
  auto it = r.allocations.find(static_cast<const char*>(base));
  if (it == r.allocations.end()) return;
  munmap(it->second.written, it->second.map_bytes);
  r.allocations.erase(it);
  r.generation.fetch_add(1, std::memory_order_release);
}

void fresh_device_range(void* ptr, size_t bytes) {
  std::memset(ptr, kUnwrittenFill, bytes);
  if (!any_tracked) return;
  const Found found = find(ptr, bytes);
  if (found.tracked) {
    clear_bits(found.tracked->written, size_t(static_cast<const char*>(ptr) - found.base), bytes);
  }
}

void mark_written(const void* ptr, size_t bytes) {
  if (!any_tracked || bytes == 0) return;
  const Found found = find(ptr, bytes);
  if (found.tracked) {
    set_bits(found.tracked->written, size_t(static_cast<const char*>(ptr) - found.base), bytes);
  }
}

}  // namespace detail

}  // namespace mpiasr::emu

// The calls GCC's outline kernel-address instrumentation makes for every load
// and store of kernels/cuda (see CMakeLists.txt, MPIASR_EMU_CHECKED_ACCESSES).
#define MPIASR_EMU_ACCESS_HOOKS(n)                                                          \
  extern "C" __attribute__((no_sanitize_address)) void __asan_load##n##_noabort(void* p) {  \
    mpiasr::emu::check_access(p, n, false, __builtin_return_address(0));                    \
  }                                                                                         \
  extern "C" __attribute__((no_sanitize_address)) void __asan_store##n##_noabort(void* p) { \
    mpiasr::emu::check_access(p, n, true, __builtin_return_address(0));                     \
  }
MPIASR_EMU_ACCESS_HOOKS(1)
MPIASR_EMU_ACCESS_HOOKS(2)
MPIASR_EMU_ACCESS_HOOKS(4)
MPIASR_EMU_ACCESS_HOOKS(8)
MPIASR_EMU_ACCESS_HOOKS(16)
#undef MPIASR_EMU_ACCESS_HOOKS

extern "C" void __asan_loadN_noabort(void* p, long n) {
  mpiasr::emu::check_access(p, size_t(n), false, __builtin_return_address(0));
}
extern "C" void __asan_storeN_noabort(void* p, long n) {
  mpiasr::emu::check_access(p, size_t(n), true, __builtin_return_address(0));
}
