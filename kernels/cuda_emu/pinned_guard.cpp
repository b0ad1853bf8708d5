// Guards on pinned pages while a copy is pending (see pinned_guard.h): a
// table of guarded page ranges, mprotect to enforce them, and a SIGSEGV
// handler that reports a fault inside one. The handler reads the table
// without a lock: a guard's text is written before its range is published.
#include "kernels/cuda_emu/pinned_guard.h"

#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "src/base/error.h"

namespace mpiasr::emu::detail {
namespace {

struct Guard {
  std::atomic<uintptr_t> begin{0}, end{0};  // whole pages; end 0 when free
  bool writes = false;
  uintptr_t base = 0;
  char copy[128] = {};
};

Guard guards[kMaxGuards];
std::mutex guards_mutex;
struct sigaction previous_action;

uintptr_t page_bytes() {
  static const uintptr_t bytes = uintptr_t(sysconf(_SC_PAGESIZE));
  return bytes;
}

void protect(uintptr_t begin, uintptr_t end, int protection) {
  if (begin >= end) return;
  if (mprotect(reinterpret_cast<void*>(begin), end - begin, protection) != 0) {
    std::fprintf(stderr, "%s:%d: mprotect of [%#lx, %#lx) to %d failed: %s\n", __FILE__, __LINE__,
                 static_cast<unsigned long>(begin), static_cast<unsigned long>(end), protection,
                 std::strerror(errno));
    std::abort();
  }
}

// Gives [begin, end) what the live guards over it ask: read-only under a
// copy that reads it, nothing under one that writes it. guards_mutex held.
void enforce(uintptr_t begin, uintptr_t end) {
  protect(begin, end, PROT_READ | PROT_WRITE);
  for (const bool writes : {false, true}) {
    for (const Guard& g : guards) {
      if (g.end == 0 || g.writes != writes) continue;
      protect(std::max(begin, g.begin.load()), std::min(end, g.end.load()),
              writes ? PROT_NONE : PROT_READ);
    }
  }
}

const char* access_kind(void* context) {
#if defined(__x86_64__)
  // Bit 1 of the page-fault error code: the access was a write.
  return (static_cast<ucontext_t*>(context)->uc_mcontext.gregs[REG_ERR] & 2) ? "write" : "read";
#else
  (void)context;
  return "access";
#endif
}

void on_fault(int signal, siginfo_t* info, void* context) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(info->si_addr);
  for (const Guard& g : guards) {
    const uintptr_t end = g.end.load(std::memory_order_acquire);
    if (address < g.begin.load(std::memory_order_acquire) || address >= end) continue;
    char line[512];
    const int n = std::snprintf(
        line, sizeof line,
        "%s:%d: host %s of pinned memory at %#lx (offset %lu in the allocation at %#lx) while "
        "%s is pending: wait for its stream or an event recorded after it first\n",
        __FILE__, __LINE__, access_kind(context), static_cast<unsigned long>(address),
        static_cast<unsigned long>(address - g.base), static_cast<unsigned long>(g.base), g.copy);
    if (n > 0) (void)!write(STDERR_FILENO, line, std::min(size_t(n), sizeof line - 1));
    _exit(int(ExitCode::kFailure));
  }
  if (previous_action.sa_flags & SA_SIGINFO) {
    previous_action.sa_sigaction(signal, info, context);
  } else if (previous_action.sa_handler != SIG_DFL && previous_action.sa_handler != SIG_IGN) {
    previous_action.sa_handler(signal);
  } else {
    std::signal(signal, SIG_DFL);  // the access faults again, now with the default action
  }
}

void install_handler() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    struct sigaction action {};
    action.sa_sigaction = on_fault;
    action.sa_flags = SA_SIGINFO | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    if (sigaction(SIGSEGV, &action, &previous_action) != 0) {
      std::fprintf(stderr, "%s:%d: sigaction(SIGSEGV) failed: %s\n", __FILE__, __LINE__,
                   std::strerror(errno));
      std::abort();
    }
  });
}

}  // namespace

int guard_pinned(const void* ptr, size_t bytes, const void* base, size_t base_bytes,
                 bool copy_writes, const char* copy) {
  const uintptr_t page = page_bytes(), p = reinterpret_cast<uintptr_t>(ptr);
  const uintptr_t allocation_end = reinterpret_cast<uintptr_t>(base) + base_bytes;
  const uintptr_t begin = (p + page - 1) / page * page;
  const uintptr_t end = p + bytes == allocation_end ? (allocation_end + page - 1) / page * page
                                                    : (p + bytes) / page * page;
  if (begin >= end) return -1;
  install_handler();
  std::lock_guard lock(guards_mutex);
  for (int i = 0; i < kMaxGuards; ++i) {
    Guard& g = guards[i];
    if (g.end != 0) continue;
    g.writes = copy_writes;
    g.base = reinterpret_cast<uintptr_t>(base);
    std::snprintf(g.copy, sizeof g.copy, "%s", copy);
    g.begin.store(begin, std::memory_order_release);
    g.end.store(end, std::memory_order_release);
    enforce(begin, end);
    return i;
  }
  return -1;
}

void open_guard(int guard) {
  if (guard < 0) return;
  std::lock_guard lock(guards_mutex);
  protect(guards[guard].begin, guards[guard].end, PROT_READ | PROT_WRITE);
}

void release_guard(int guard) {
  if (guard < 0) return;
  std::lock_guard lock(guards_mutex);
  Guard& g = guards[guard];
  const uintptr_t begin = g.begin, end = g.end;
  g.end.store(0, std::memory_order_release);
  g.begin.store(0, std::memory_order_release);
  enforce(begin, end);
}

}  // namespace mpiasr::emu::detail
