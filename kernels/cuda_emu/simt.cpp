// The SIMT emulator's engine (see simt.h): a launch's blocks spread over two
// OS threads, and within a block one fiber per CUDA thread, scheduled here.
//
// Per OS thread, a Runner owns the fibers (Boost.Context fcontext, 64 KiB
// mmap'd stacks under a guard page, reused across blocks and launches) and a
// shared-memory arena. Running a block:
//   queue     the threads to start or resume, filled at the block's start and
//             at every barrier release in the Schedule's order; the lanes of
//             a completed warp collective (the one that completed it too) are
//             queued in the Schedule's order: appended (ascending,
//             descending), or in an order drawn from the block's random
//             sequence (seeded by the schedule seed and the block) and mixed
//             into the threads queued that have not run yet (shuffled)
//   scheduler pops a thread and switches to its fiber (a new thread takes an
//             idle fiber); the fiber runs until it waits or ends. A fiber whose
//             thread ended starts the next queued thread itself if that one
//             has not started (no switch), so a kernel without barriers runs
//             its whole block on one fiber
//   barrier   when the queue is empty and every thread waits at the same
//             __syncthreads, all are queued again in a new order
//   racecheck when the launch runs under it, each thread's vector clock over
//             its warp's lanes (racecheck.h): at the block's start each own
//             clock is 1 and the others 0; a barrier's release sets every own
//             clock past the largest of the block; a completed collective
//             joins the clocks of its lanes and advances each own
//   errors    a misuse found inside a fiber records the message and unwinds
//             that fiber's stack (an Abandon exception, caught at its base);
//             the scheduler then resumes every other waiting fiber with the
//             same exception, so each block ends with every stack unwound
// Under AddressSanitizer every switch is announced with
// __sanitizer_start_switch_fiber / __sanitizer_finish_switch_fiber, so reports
// show the fiber's stack and ASan never mistakes a switch for an overflow.
#include "kernels/cuda_emu/simt.h"

#include <sanitizer/asan_interface.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <boost/context/detail/fcontext.hpp>
#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "kernels/cuda_emu/memory_check.h"
#include "kernels/cuda_emu/racecheck.h"
#include "kernels/cuda_emu/runtime.h"
#include "src/base/error.h"

namespace mpiasr::emu {

namespace {

namespace fc = boost::context::detail;

constexpr size_t kStackBytes = size_t(64) << 10;
constexpr unsigned kMaxThreadsPerBlock = 1024;
constexpr dim3 kMaxBlock(1024, 1024, 64);
constexpr dim3 kMaxGrid(0x7fffffffu, 65535, 65535);
constexpr size_t kSharedBytesPerBlock = size_t(48) << 10;
// The arena holds the variables and a poisoned gap before each.
constexpr size_t kSharedArenaBytes = 2 * kSharedBytesPerBlock;
constexpr size_t kSharedGap = 32;
constexpr size_t kSharedAlignment = 16;
constexpr unsigned char kSharedFill = 0xFF;
constexpr int kWarp = 32;

constexpr const char* kScheduleVariable = "MPIASR_EMU_SCHEDULE";
constexpr const char* kSeedVariable = "MPIASR_EMU_SEED";

Schedule schedule_from_environment() {
  const char* value = std::getenv(kScheduleVariable);
  if (!value || !*value || std::strcmp(value, "shuffled") == 0) return Schedule::kShuffled;
  if (std::strcmp(value, "ascending") == 0) return Schedule::kAscending;
  if (std::strcmp(value, "descending") == 0) return Schedule::kDescending;
  MPIASR_FAIL(ExitCode::kUsage, kScheduleVariable
                                    << "=" << value
                                    << " is not a schedule (shuffled, ascending or descending)");
}

std::atomic<Schedule>& schedule_setting() {
  static std::atomic<Schedule> schedule{schedule_from_environment()};
  return schedule;
}

uint64_t seed_from_environment() {
  const char* value = std::getenv(kSeedVariable);
  if (!value || !*value) return 0;
  char* end = nullptr;
  errno = 0;
  const unsigned long long seed = std::strtoull(value, &end, 10);
  if (errno != 0 || *end != '\0' || value[0] == '-') {
    MPIASR_FAIL(ExitCode::kUsage,
                kSeedVariable << "=" << value << " is not an unsigned integer (a schedule seed)");
  }
  return seed;
}

std::atomic<uint64_t>& seed_setting() {
  static std::atomic<uint64_t> seed{seed_from_environment()};
  return seed;
}

#if defined(__SANITIZE_ADDRESS__)
void start_switch(void** fake_stack, const void* bottom, size_t size) {
  __sanitizer_start_switch_fiber(fake_stack, bottom, size);
}
void finish_switch(void* fake_stack, const void** bottom, size_t* size) {
  __sanitizer_finish_switch_fiber(fake_stack, bottom, size);
}
#else
void start_switch(void**, const void*, size_t) {}
void finish_switch(void*, const void**, size_t*) {}
#endif

size_t round_up(size_t n, size_t to) {
  return (n + to - 1) / to * to;
}

std::string hex(unsigned mask) {
  std::ostringstream out;
  out << "0x" << std::hex << mask;
  return out.str();
}

std::string place(const std::source_location& where) {
  return std::string(where.file_name()) + ":" + std::to_string(where.line());
}

bool same_place(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() &&
         std::strcmp(a.file_name(), b.file_name()) == 0;
}

std::string coordinates(uint3 v) {
  return "(" + std::to_string(v.x) + "," + std::to_string(v.y) + "," + std::to_string(v.z) + ")";
}

struct Launch {
  dim3 grid, block;
  size_t dynamic_shared_bytes;
  void (*body)(const void*);
  const void* closure;
  int threads;  // per block
  Schedule schedule;
  uint64_t seed;
  uint64_t number;  // detail::launch_number()
  bool racecheck;
  uint32_t first_block;  // racecheck's serial of block 0
};

struct Fiber {
  fc::fcontext_t context = nullptr;
  char* stack = nullptr;  // lowest address of the usable stack
  int thread = -1;        // the CUDA thread it runs, -1 when idle
};

// Thrown inside a fiber to unwind its thread when the block fails.
struct Abandon {};

struct Thread {
  Fiber* fiber = nullptr;  // null before it starts and after it ends
  uint64_t deposit = 0;    // this lane's value in a warp collective
  int argument = 0, width = kWarp;
  uint64_t result = 0;
};

// A warp collective that some lanes of one warp wait in.
struct WarpGroup {
  int warp;
  unsigned mask, arrived;
  detail::WarpOp op;
  const char* name;
  std::source_location where;
};

struct SharedVariable {
  const SharedSlot* slot;
  size_t offset;
};

void fiber_main(fc::transfer_t from);

std::string race_clocks_exhausted() {
  return "racecheck: the block passed more than " + std::to_string(detail::kMaxRaceClock) +
         " synchronization points, more than its clocks hold";
}

// Runs blocks on the OS thread that owns it, one at a time.
class Runner {
 public:
  Runner() {
    arena_ = static_cast<unsigned char*>(std::aligned_alloc(64, kSharedArenaBytes));
    if (!arena_) std::abort();
    ASAN_POISON_MEMORY_REGION(arena_, kSharedArenaBytes);
  }
  ~Runner() {
    ASAN_UNPOISON_MEMORY_REGION(arena_, kSharedArenaBytes);
    std::free(arena_);
    for (Fiber* fiber : fibers_) {
      munmap(fiber->stack - page_bytes(), page_bytes() + kStackBytes);
      delete fiber;
    }
  }
  Runner(const Runner&) = delete;
  Runner& operator=(const Runner&) = delete;

  // Runs block `linear` of the launch; returns what went wrong, empty if nothing.
  std::string run_block(const Launch& launch, uint64_t linear);

  bool in_block() const { return launch_ != nullptr; }
  uint64_t launch_number() const { return launch_->number; }

  // Called by the kernels' fibers (simt.h).
  void syncthreads(const std::source_location& where);
  uint64_t warp_collective(detail::WarpOp op, unsigned mask, uint64_t value, int argument,
                           int width, const char* name, const std::source_location& where);
  void* shared_variable(const SharedSlot* slot, size_t bytes, size_t alignment, const char* name);
  void* dynamic_shared() { return arena_; }
  void require(bool ok, const char* what, const std::source_location& where) {
    if (!ok) fail(std::string(what) + " (" + place(where) + ")");
  }
  [[noreturn]] void fail_kernel(const std::string& what) { fail(what); }

  // The body of every fiber: runs threads until the runner is destroyed.
  [[noreturn]] void fiber_loop();
  void entered_fiber(fc::fcontext_t scheduler);

 private:
  static size_t page_bytes() { return size_t(sysconf(_SC_PAGESIZE)); }

  Fiber* take_fiber();
  void resume(int thread);
  void to_scheduler();
  void wait();
  [[noreturn]] void fail(const std::string& what);
  void record(const std::string& what);
  void set_thread_index(int thread);
  void order_queue(size_t from);
  void interleave_released(size_t from);
  void fill_queue();
  void reset_shared();
  bool run_thread(int thread);
  void thread_exited(int thread);
  void complete(const WarpGroup& group);
  void start_race_clocks(uint64_t linear);
  void advance_race_interval();
  void join_race_clocks(const WarpGroup& group);
  unsigned lanes_of(int warp) const;
  std::string describe_deadlock() const;

  // The running launch and block.
  const Launch* launch_ = nullptr;
  uint64_t block_linear_ = 0;
  std::vector<Thread> threads_;
  std::vector<int> queue_;
  size_t head_ = 0;          // queue_[head_..] are still to run
  std::vector<int> merged_;  // interleave_released's
  std::mt19937_64 random_;   // the block's, for the shuffled schedule
  int current_ = 0;          // the CUDA thread whose fiber runs
  int at_barrier_ = 0, exited_ = 0, interval_ = 0;
  std::source_location barrier_where_;
  std::vector<WarpGroup> groups_;
  std::vector<unsigned> exited_lanes_;  // per warp
  std::string error_;
  bool abandoning_ = false;  // waiting fibers unwind when resumed

  // Shared memory: [0, dynamic bytes) then the static variables, each after a gap.
  unsigned char* arena_ = nullptr;
  size_t shared_bytes_ = 0;   // declared: dynamic + static variables
  size_t shared_extent_ = 0;  // arena bytes in use
  size_t poisoned_extent_ = 0;
  std::vector<SharedVariable> variables_;

  // racecheck: clocks_[32 t + lane] is what thread t knows of the clock of
  // lane `lane` of its warp; max_clock_ the largest of the block.
  detail::RaceView race_view_;
  std::vector<uint32_t> clocks_;
  uint32_t max_clock_ = 0;
  std::vector<detail::RaceCell>
      shared_cells_;  // kSharedArenaBytes, at the first block under racecheck

  // Fibers, and the scheduler's context while a fiber runs.
  std::vector<Fiber*> fibers_, idle_;
  fc::fcontext_t scheduler_ = nullptr;
  const void* scheduler_stack_ = nullptr;
  size_t scheduler_stack_bytes_ = 0;
};

thread_local Runner runner;

void fiber_main(fc::transfer_t from) {
  runner.entered_fiber(from.fctx);
  runner.fiber_loop();
}

void Runner::entered_fiber(fc::fcontext_t scheduler) {
  finish_switch(nullptr, &scheduler_stack_, &scheduler_stack_bytes_);
  scheduler_ = scheduler;
}

Fiber* Runner::take_fiber() {
  if (!idle_.empty()) {
    Fiber* fiber = idle_.back();
    idle_.pop_back();
    return fiber;
  }
  const size_t page = page_bytes();
  void* mapping = mmap(nullptr, page + kStackBytes, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
  if (mapping == MAP_FAILED) {
    MPIASR_FAIL(ExitCode::kFailure, "SIMT emulator: no memory for a fiber stack of "
                                        << kStackBytes << " bytes (" << fibers_.size()
                                        << " fibers exist)");
  }
  mprotect(mapping, page, PROT_NONE);  // the guard page below the stack
  Fiber* fiber = new Fiber;
  fiber->stack = static_cast<char*>(mapping) + page;
  fiber->context = fc::make_fcontext(fiber->stack + kStackBytes, kStackBytes, fiber_main);
  fibers_.push_back(fiber);
  return fiber;
}

void Runner::set_thread_index(int thread) {
  const unsigned t = unsigned(thread), x = launch_->block.x, y = launch_->block.y;
  threadIdx = {t % x, (t / x) % y, t / (x * y)};
  current_ = thread;
  if (launch_->racecheck) {
    race_view_.thread = t;
    race_view_.clocks = clocks_.data() + size_t(kWarp) * t;
  }
}

// The scheduler switches to the fiber of `thread` (a new thread takes an idle one).
void Runner::resume(int thread) {
  Thread& state = threads_[size_t(thread)];
  if (!state.fiber) {
    state.fiber = take_fiber();
    state.fiber->thread = thread;
  }
  Fiber* fiber = state.fiber;
  set_thread_index(thread);
  race_view_.stack = fiber->stack;
  void* fake_stack = nullptr;
  start_switch(&fake_stack, fiber->stack, kStackBytes);
  fiber->context = fc::jump_fcontext(fiber->context, nullptr).fctx;
  finish_switch(fake_stack, nullptr, nullptr);
}

// A fiber returns to the scheduler; it continues when the scheduler resumes it.
void Runner::to_scheduler() {
  void* fake_stack = nullptr;
  start_switch(&fake_stack, scheduler_stack_, scheduler_stack_bytes_);
  scheduler_ = fc::jump_fcontext(scheduler_, nullptr).fctx;
  finish_switch(fake_stack, nullptr, nullptr);
}

// A thread waits at a barrier or in a warp collective.
void Runner::wait() {
  to_scheduler();
  if (abandoning_) throw Abandon{};
}

void Runner::record(const std::string& what) {
  if (!error_.empty()) return;
  std::ostringstream out;
  out << "block " << coordinates(blockIdx) << ", thread " << coordinates(threadIdx) << ": " << what;
  error_ = out.str();
}

void Runner::fail(const std::string& what) {
  record(what);
  throw Abandon{};
}

// Puts queue_[from..], in ascending order, in the order of the schedule.
void Runner::order_queue(size_t from) {
  const auto first = queue_.begin() + std::ptrdiff_t(from);
  if (launch_->schedule == Schedule::kDescending) std::reverse(first, queue_.end());
  if (launch_->schedule == Schedule::kShuffled) {
    for (size_t i = queue_.size() - 1; i > from; --i)
      std::swap(queue_[i], queue_[from + random_() % (i - from + 1)]);
  }
}

void Runner::fill_queue() {
  queue_.resize(size_t(launch_->threads));
  std::iota(queue_.begin(), queue_.end(), 0);
  order_queue(0);
  head_ = 0;
}

void Runner::reset_shared() {
  ASAN_POISON_MEMORY_REGION(arena_, poisoned_extent_);
  const size_t dynamic_bytes = launch_->dynamic_shared_bytes;
  ASAN_UNPOISON_MEMORY_REGION(arena_, dynamic_bytes);
  std::memset(arena_, kSharedFill, dynamic_bytes);
  shared_bytes_ = dynamic_bytes;
  shared_extent_ = round_up(dynamic_bytes, kSharedAlignment);
  poisoned_extent_ = shared_extent_;
  variables_.clear();
}

std::string Runner::run_block(const Launch& launch, uint64_t linear) {
  launch_ = &launch;
  block_linear_ = linear;
  const uint64_t gx = launch.grid.x, gy = launch.grid.y;
  blockIdx = {unsigned(linear % gx), unsigned(linear / gx % gy), unsigned(linear / (gx * gy))};
  blockDim = launch.block;
  gridDim = launch.grid;
  const int n = launch.threads;
  threads_.assign(size_t(n), Thread{});
  groups_.clear();
  exited_lanes_.assign(size_t((n + kWarp - 1) / kWarp), 0);
  at_barrier_ = exited_ = interval_ = 0;
  std::seed_seq seed{launch.seed, linear};
  random_.seed(seed);
  error_.clear();
  reset_shared();
  if (launch.racecheck) start_race_clocks(linear);
  detail::running_race_view = launch.racecheck ? &race_view_ : nullptr;
  fill_queue();
  try {
    while (error_.empty()) {
      if (head_ < queue_.size()) {
        resume(queue_[head_++]);
      } else if (exited_ == n) {
        break;
      } else if (at_barrier_ == n) {
        at_barrier_ = 0;
        ++interval_;
        if (launch.racecheck) advance_race_interval();
        fill_queue();
      } else {
        error_ = describe_deadlock();
      }
    }
  } catch (const Error& e) {  // from take_fiber
    error_ = e.what();
  }
  if (!error_.empty()) {
    abandoning_ = true;
    for (int t = 0; t < n; ++t) {
      if (threads_[size_t(t)].fiber) resume(t);
    }
    abandoning_ = false;
  }
  detail::running_race_view = nullptr;
  launch_ = nullptr;
  return error_;
}

// Runs the kernel as `thread`; false when the thread was abandoned or threw.
bool Runner::run_thread(int thread) {
  try {
    launch_->body(launch_->closure);
    thread_exited(thread);
    return true;
  } catch (const Abandon&) {
    return false;
  } catch (const std::exception& e) {
    record(std::string("the kernel threw: ") + e.what());
  } catch (...) {
    record("the kernel threw an exception that is not a std::exception");
  }
  return false;
}

void Runner::fiber_loop() {
  for (;;) {
    const int thread = current_;
    const bool finished = run_thread(thread);
    Fiber* self = threads_[size_t(thread)].fiber;
    threads_[size_t(thread)].fiber = nullptr;
    // The next queued thread runs here when it has not started yet.
    if (finished && head_ < queue_.size() && !threads_[size_t(queue_[head_])].fiber) {
      const int next = queue_[head_++];
      threads_[size_t(next)].fiber = self;
      self->thread = next;
      set_thread_index(next);
      continue;
    }
    self->thread = -1;
    idle_.push_back(self);
    to_scheduler();  // resume() gives this fiber its next thread
  }
}

unsigned Runner::lanes_of(int warp) const {
  const int rest = launch_->threads - warp * kWarp;
  return rest >= kWarp ? 0xffffffffu : (1u << rest) - 1;
}

void Runner::thread_exited(int thread) {
  exited_lanes_[size_t(thread / kWarp)] |= 1u << (thread % kWarp);
  ++exited_;
  if (at_barrier_ > 0) {
    fail("exited while " + std::to_string(at_barrier_) + " threads of the block wait at " +
         "__syncthreads (" + place(barrier_where_) +
         "): a barrier must be reached by every thread");
  }
  const int warp = thread / kWarp, lane = thread % kWarp;
  for (const WarpGroup& group : groups_) {
    if (group.warp == warp && (group.mask >> lane & 1u)) {
      fail("exited while lanes " + hex(group.arrived) + " wait for it in " + group.name +
           " (mask " + hex(group.mask) + ", " + place(group.where) + ")");
    }
  }
}

void Runner::syncthreads(const std::source_location& where) {
  if (exited_ > 0) {
    fail("__syncthreads (" + place(where) + ") reached after " + std::to_string(exited_) +
         " threads of the block exited: a barrier must be reached by every thread");
  }
  if (at_barrier_ > 0 && !same_place(where, barrier_where_)) {
    fail("threads wait at two different __syncthreads: " + place(barrier_where_) + " (" +
         std::to_string(at_barrier_) + " threads) and " + place(where));
  }
  if (at_barrier_ == 0) barrier_where_ = where;
  ++at_barrier_;
  wait();
}

uint64_t Runner::warp_collective(detail::WarpOp op, unsigned mask, uint64_t value, int argument,
                                 int width, const char* name, const std::source_location& where) {
  using detail::WarpOp;
  const int thread = current_, warp = thread / kWarp, lane = thread % kWarp;
  const unsigned bit = 1u << lane;
  auto call = [&] { return std::string(name) + " (" + place(where) + ", mask " + hex(mask) + ")"; };
  if (!(mask & bit))
    fail(call() + ": the mask leaves out the calling lane " + std::to_string(lane));
  if (mask & ~lanes_of(warp)) {
    fail(call() + ": the mask names lanes the warp does not have (it has " + hex(lanes_of(warp)) +
         ")");
  }
  if (const unsigned exited = mask & exited_lanes_[size_t(warp)]) {
    fail(call() + ": the mask names lanes " + hex(exited) + ", which have exited");
  }
  if (width < 1 || width > kWarp || (width & (width - 1)) != 0) {
    fail(call() + ": width " + std::to_string(width) + " is not a power of two in [1, 32]");
  }
  size_t g = 0;
  while (g < groups_.size() && !(groups_[g].warp == warp && (groups_[g].mask & bit))) ++g;
  if (g == groups_.size()) {
    groups_.push_back({warp, mask, 0, op, name, where});
  } else if (groups_[g].mask != mask || groups_[g].op != op ||
             (op == WarpOp::kWmma && std::strcmp(groups_[g].name, name) != 0)) {
    fail(call() + " meets lanes " + hex(groups_[g].arrived) + " waiting in " + groups_[g].name +
         " (" + place(groups_[g].where) + ", mask " + hex(groups_[g].mask) + ")");
  }
  Thread& self = threads_[size_t(thread)];
  self.deposit = value;
  self.argument = argument;
  self.width = width;
  groups_[g].arrived |= bit;
  if (groups_[g].arrived != mask) {
    wait();
    return self.result;
  }
  const WarpGroup group = groups_[g];
  groups_.erase(groups_.begin() + std::ptrdiff_t(g));
  complete(group);
  wait();
  return self.result;
}

// Every lane of a complete collective gets its result and is queued, the
// calling one too, in the schedule's order.
void Runner::complete(const WarpGroup& group) {
  using detail::WarpOp;
  const int base = group.warp * kWarp;
  unsigned ballot = 0;
  for (int lane = 0; lane < kWarp; ++lane) {
    if ((group.mask >> lane & 1u) && threads_[size_t(base + lane)].deposit != 0)
      ballot |= 1u << lane;
  }
  for (int lane = 0; lane < kWarp; ++lane) {
    if (!(group.mask >> lane & 1u)) continue;
    Thread& thread = threads_[size_t(base + lane)];
    const int width = thread.width, segment = lane & ~(width - 1);
    const unsigned delta = unsigned(thread.argument);
    int source = lane;
    switch (group.op) {
      case WarpOp::kShfl:
        source = segment + (thread.argument & (width - 1));
        break;
      case WarpOp::kShflUp:
        if (unsigned(lane - segment) >= delta) source = lane - int(delta);
        break;
      case WarpOp::kShflDown:
        if (delta < unsigned(width) && unsigned(lane - segment) + delta < unsigned(width)) {
          source = lane + int(delta);
        }
        break;
      case WarpOp::kShflXor: {
        const int other = lane ^ thread.argument;
        if (other >= 0 && other < segment + width) source = other;
        break;
      }
      case WarpOp::kBallot:
      case WarpOp::kSyncWarp:
      case WarpOp::kWmma:
        break;
    }
    if (!(group.mask >> source & 1u)) {
      fail(std::string(group.name) + " (" + place(group.where) + ", mask " + hex(group.mask) +
           "): lane " + std::to_string(lane) + " reads lane " + std::to_string(source) +
           ", which is not in the mask");
    }
    const bool vote =
        group.op == WarpOp::kBallot || group.op == WarpOp::kSyncWarp || group.op == WarpOp::kWmma;
    thread.result = vote ? ballot : threads_[size_t(base + source)].deposit;
  }
  if (launch_->racecheck) join_race_clocks(group);
  const size_t from = queue_.size();
  for (int lane = 0; lane < kWarp; ++lane) {
    if (group.mask >> lane & 1u) queue_.push_back(base + lane);
  }
  order_queue(from);
  if (launch_->schedule == Schedule::kShuffled) interleave_released(from);
}

// Mixes the lanes just released, queue_[from..], into the threads queued
// before them that have not run yet, queue_[head_..from), each part keeping
// its order and every interleaving as likely: a warp past a collective may
// run ahead of threads of other warps still short of theirs, as on a GPU.
void Runner::interleave_released(size_t from) {
  merged_.clear();
  size_t waiting = head_, released = from;
  while (waiting < from || released < queue_.size()) {
    const size_t waiting_left = from - waiting, released_left = queue_.size() - released;
    const bool take_released = random_() % (waiting_left + released_left) < released_left;
    merged_.push_back(queue_[take_released ? released++ : waiting++]);
  }
  queue_.swap(merged_);
  head_ = 0;
}

void Runner::start_race_clocks(uint64_t linear) {
  const Launch& launch = *launch_;
  if (shared_cells_.empty()) shared_cells_.resize(kSharedArenaBytes);
  clocks_.assign(size_t(kWarp) * size_t(launch.threads), 0);
  for (int t = 0; t < launch.threads; ++t) clocks_[size_t(kWarp * t + t % kWarp)] = 1;
  max_clock_ = 1;
  race_view_ = {uint32_t(launch.first_block + linear),
                launch.first_block,
                0,
                1,
                clocks_.data(),
                launch.grid.x,
                launch.grid.y,
                launch.block.x,
                launch.block.y,
                arena_,
                kSharedArenaBytes,
                shared_cells_.data(),
                nullptr,
                kStackBytes};
}

// Every own clock passes every clock the block has had, so what any thread
// did before the barrier is ordered before what any does after it.
void Runner::advance_race_interval() {
  if (max_clock_ == detail::kMaxRaceClock) {
    error_ = "block " + coordinates(blockIdx) + ": " + race_clocks_exhausted();
    return;
  }
  const uint32_t next = ++max_clock_;
  for (int t = 0; t < launch_->threads; ++t) clocks_[size_t(kWarp * t + t % kWarp)] = next;
  race_view_.interval = next;
}

// Each lane of the collective learns what every other lane of its mask knew,
// then its own clock advances.
void Runner::join_race_clocks(const WarpGroup& group) {
  uint32_t joined[kWarp] = {};
  const size_t base = size_t(kWarp) * size_t(kWarp * group.warp);
  for (int lane = 0; lane < kWarp; ++lane) {
    if (!(group.mask >> lane & 1u)) continue;
    const uint32_t* known = clocks_.data() + base + size_t(kWarp * lane);
    for (int other = 0; other < kWarp; ++other)
      joined[other] = std::max(joined[other], known[other]);
  }
  for (int lane = 0; lane < kWarp; ++lane) {
    if (!(group.mask >> lane & 1u)) continue;
    uint32_t* known = clocks_.data() + base + size_t(kWarp * lane);
    std::copy(joined, joined + kWarp, known);
    max_clock_ = std::max(max_clock_, ++known[lane]);
  }
  if (max_clock_ > detail::kMaxRaceClock) fail(race_clocks_exhausted());
}

std::string Runner::describe_deadlock() const {
  std::ostringstream out;
  out << "block " << coordinates(blockIdx) << ": no thread can run, " << exited_ << " of "
      << launch_->threads << " exited";
  if (at_barrier_ > 0) {
    out << ", " << at_barrier_ << " wait at __syncthreads (" << place(barrier_where_) << ")";
  }
  for (const WarpGroup& group : groups_) {
    out << ", lanes " << hex(group.arrived) << " of warp " << group.warp << " wait in "
        << group.name << " (" << place(group.where) << ", mask " << hex(group.mask)
        << ") for lanes " << hex(group.mask & ~group.arrived);
  }
  return out.str();
}

void* Runner::shared_variable(const SharedSlot* slot, size_t bytes, size_t alignment,
                              const char* name) {
  for (const SharedVariable& variable : variables_) {
    if (variable.slot == slot) return arena_ + variable.offset;
  }
  if (shared_bytes_ + bytes > kSharedBytesPerBlock) {
    fail("shared variable " + std::string(name) + " of " + std::to_string(bytes) +
         " bytes takes the block's shared memory to " + std::to_string(shared_bytes_ + bytes) +
         " bytes (" + std::to_string(launch_->dynamic_shared_bytes) + " dynamic), more than " +
         std::to_string(kSharedBytesPerBlock));
  }
  const size_t offset =
      round_up(shared_extent_ + kSharedGap, std::max(alignment, kSharedAlignment));
  if (offset + bytes > kSharedArenaBytes) {
    fail("shared variable " + std::string(name) + " does not fit the emulator's arena after " +
         std::to_string(variables_.size()) + " others");
  }
  ASAN_UNPOISON_MEMORY_REGION(arena_ + offset, bytes);
  std::memset(arena_ + offset, kSharedFill, bytes);
  variables_.push_back({slot, offset});
  shared_bytes_ += bytes;
  shared_extent_ = offset + bytes;
  poisoned_extent_ = shared_extent_;
  return arena_ + offset;
}

Runner& kernel_runner(const char* what) {
  if (!runner.in_block()) {
    MPIASR_FAIL(ExitCode::kFailure, what << " called outside a kernel");
  }
  return runner;
}

// The blocks of a launch, taken in order by this thread and a helper thread.
class BlockPool {
 public:
  BlockPool() : helper_([this] { helper_main(); }) {}
  ~BlockPool() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    helper_.join();
  }

  // Runs blocks [0, count) of `launch`; returns the error of the lowest
  // failed block, empty if none failed (blocks after a failure may not run).
  std::string run(const Launch& launch, uint64_t count) {
    std::lock_guard serial(launch_mutex_);
    {
      std::lock_guard lock(mutex_);
      launch_ = &launch;
      count_ = count;
      next_ = 0;
      failed_ = false;
      error_.clear();
      helper_busy_ = true;
      ++generation_;
    }
    wake_.notify_all();
    work();
    std::unique_lock lock(mutex_);
    done_.wait(lock, [this] { return !helper_busy_; });
    launch_ = nullptr;
    return error_;
  }

 private:
  void work() {
    for (;;) {
      const uint64_t block = next_.fetch_add(1);
      if (block >= count_ || failed_) return;
      const std::string error = runner.run_block(*launch_, block);
      if (!error.empty()) {
        std::lock_guard lock(mutex_);
        if (error_.empty() || block < error_block_) {
          error_ = error;
          error_block_ = block;
        }
        failed_ = true;
      }
    }
  }

  void helper_main() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
        if (stop_) return;
        seen = generation_;
      }
      work();
      {
        std::lock_guard lock(mutex_);
        helper_busy_ = false;
      }
      done_.notify_all();
    }
  }

  std::mutex launch_mutex_;  // one launch at a time
  std::mutex mutex_;
  std::condition_variable wake_, done_;
  const Launch* launch_ = nullptr;
  uint64_t count_ = 0;
  std::atomic<uint64_t> next_{0};
  std::atomic<bool> failed_{false};
  std::string error_;
  uint64_t error_block_ = 0;
  uint64_t generation_ = 0;
  bool helper_busy_ = false;
  bool stop_ = false;
  std::thread helper_;
};

// The launch's schedule and the variable that sets it, as printed at the
// first launch and in every launch failure.
std::string schedule_text(const Launch& launch) {
  switch (launch.schedule) {
    case Schedule::kAscending:
      return std::string("threads in ascending order, ") + kScheduleVariable;
    case Schedule::kDescending:
      return std::string("threads in descending order, ") + kScheduleVariable;
    case Schedule::kShuffled:
      break;
  }
  return "schedule seed " + std::to_string(launch.seed) + ", " + kSeedVariable;
}

[[noreturn]] void launch_failed(const LaunchSite& site, const std::string& what) {
  ::mpiasr::detail::fail(ExitCode::kFailure, site.file, site.line,
                         std::string("launch of kernel ") + site.kernel + " failed: " + what);
}

}  // namespace

void set_schedule(Schedule schedule) {
  schedule_setting() = schedule;
}

uint64_t schedule_seed() {
  return seed_setting();
}

void set_schedule_seed(uint64_t seed) {
  seed_setting() = seed;
}

namespace detail {

void queue_launch(const LaunchSite& site, dim3 grid, dim3 block, size_t dynamic_shared_bytes,
                  cudaStream_t stream, std::function<void()> grid_run) {
  check_launch(site, grid, block, dynamic_shared_bytes);
  if (!stream_is_valid(stream)) {
    launch_failed(site, "the stream was not created or has been destroyed");
  }
  count_launch();
  queue_work(stream, std::move(grid_run));
}

void check_launch(const LaunchSite& site, dim3 grid, dim3 block, size_t dynamic_shared_bytes) {
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  if (block.x == 0 || block.y == 0 || block.z == 0 || block.x > kMaxBlock.x ||
      block.y > kMaxBlock.y || block.z > kMaxBlock.z || threads > kMaxThreadsPerBlock) {
    launch_failed(site, "block " + coordinates({block.x, block.y, block.z}) + " of " +
                            std::to_string(threads) +
                            " threads: at most 1024 threads per block, at most (1024,1024,64)");
  }
  if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > kMaxGrid.x || grid.y > kMaxGrid.y ||
      grid.z > kMaxGrid.z) {
    launch_failed(site, "grid " + coordinates({grid.x, grid.y, grid.z}) +
                            ": every dimension at least 1, at most (2^31-1,65535,65535)");
  }
  if (dynamic_shared_bytes > kSharedBytesPerBlock) {
    launch_failed(site, std::to_string(dynamic_shared_bytes) +
                            " bytes of dynamic shared memory, more than the " +
                            std::to_string(kSharedBytesPerBlock) + " a block may have");
  }
  if (runner.in_block()) launch_failed(site, "launched from inside a kernel");
}

void run_grid(const LaunchSite& site, dim3 grid, dim3 block, size_t dynamic_shared_bytes,
              void (*body)(const void*), const void* closure) {
  check_launch(site, grid, block, dynamic_shared_bytes);
  const uint64_t threads = uint64_t(block.x) * block.y * block.z;
  const uint64_t blocks = uint64_t(grid.x) * grid.y * grid.z;
  const bool racecheck = racecheck_enabled();
  // racecheck tells blocks apart by a serial unique in the process.
  static std::atomic<uint64_t> next_block_serial{1};
  const uint64_t first_block = racecheck ? next_block_serial.fetch_add(blocks) : 0;
  if (racecheck && first_block + blocks > UINT32_MAX) {
    launch_failed(site, "racecheck: the process has run more than 2^32 - 1 blocks under it");
  }
  static std::atomic<uint64_t> launches{0};
  const Launch launch{grid,       block,        dynamic_shared_bytes,      body,
                      closure,    int(threads), schedule_setting().load(), seed_setting().load(),
                      ++launches, racecheck,    uint32_t(first_block)};
  static std::once_flag schedule_printed;
  std::call_once(schedule_printed, [&] {
    std::fprintf(stderr, "SIMT emulator: %s\n", schedule_text(launch).c_str());
  });
  std::string error;
  if (blocks == 1) {
    error = runner.run_block(launch, 0);
  } else {
    static BlockPool pool;
    error = pool.run(launch, blocks);
  }
  if (!error.empty()) {
    launch_failed(site, error + " (" + schedule_text(launch) + ")");
  }
}

}  // namespace detail

namespace detail {

void syncthreads(const std::source_location& where) {
  kernel_runner("__syncthreads").syncthreads(where);
}

uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int argument, int width,
                         const char* name, const std::source_location& where) {
  return kernel_runner(name).warp_collective(op, mask, value, argument, width, name, where);
}

void* shared_variable(const SharedSlot* slot, size_t bytes, size_t alignment, const char* name) {
  return kernel_runner("MPIASR_SHARED").shared_variable(slot, bytes, alignment, name);
}

void* dynamic_shared() {
  return kernel_runner("MPIASR_DYNAMIC_SHARED").dynamic_shared();
}

void require(bool ok, const char* what, const std::source_location& where) {
  kernel_runner(what).require(ok, what, where);
}

bool in_kernel() {
  return runner.in_block();
}

uint64_t launch_number() {
  return kernel_runner("launch_number").launch_number();
}

void fail_kernel(const std::string& what) {
  kernel_runner(what.c_str()).fail_kernel(what);
}

thread_local constinit const RaceView* running_race_view = nullptr;

}  // namespace detail

}  // namespace mpiasr::emu
