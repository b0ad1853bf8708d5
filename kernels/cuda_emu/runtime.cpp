// The CUDA runtime on the CPU (see runtime.h): allocations, pinned host
// memory, streams, events and graphs are kept in registries so that every
// handle and device range is checked; work queued on a stream waits in the
// stream's queue until a synchronizing call runs it, and stream capture
// records work into the graph of the capture instead.
#include "kernels/cuda_emu/runtime.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "kernels/cuda_emu/memory_check.h"
#include "kernels/cuda_emu/pinned_guard.h"

// The work of a graph, in issue order.
struct CUgraph_st {
  std::vector<std::function<void()>> work;
};

struct CUgraphExec_st {
  std::vector<std::function<void()>> work;
};

namespace {

// One stream capture: the graph it builds and the streams it has drawn in.
struct Capture {
  cudaStream_t origin = nullptr;
  cudaStreamCaptureMode mode = cudaStreamCaptureModeGlobal;
  std::thread::id thread;
  std::unique_ptr<CUgraph_st> graph = std::make_unique<CUgraph_st>();
  bool invalidated = false;
};

struct Queue;

// A point in a stream's queue: reached once `queue` has done `count` pieces of work.
struct Mark {
  std::shared_ptr<Queue> queue;
  uint64_t count = 0;
};

// One piece of queued work: it may run once every mark in `after` is reached.
struct Work {
  std::function<void()> run;  // empty for a wait on an event
  std::vector<Mark> after;
  int guard = -1;  // the pinned pages a copy guards while pending (pinned_guard.h)
};

// What was queued on a stream and has not run, in stream order.
struct Queue {
  std::deque<Work> pending;
  uint64_t queued = 0, done = 0;
  bool blocking = false;  // work on the legacy default stream waits for this stream's
  bool orphaned = false;  // its stream is destroyed: dropped once empty
};

struct Counters {
  std::atomic<uint64_t> launches{0}, memsets{0}, copies{0}, graph_launches{0}, graph_nodes_run{0},
      device_syncs{0}, stream_syncs{0}, event_syncs{0}, blocking_copies{0};
};

struct State {
  std::mutex mutex;
  std::map<const char*, size_t> allocations;  // base -> bytes
  size_t allocated = 0;
  std::map<const char*, size_t> pinned;  // cudaMallocHost / cudaHostAlloc: base -> bytes
  std::set<const CUstream_st*> streams;
  std::set<const CUevent_st*> events;
  std::set<const CUgraph_st*> graphs;
  std::set<const CUgraphExec_st*> execs;
  std::set<std::shared_ptr<Capture>> captures;  // in progress
  Counters counts;
  // The legacy default stream's queue, then every stream's until it is
  // destroyed and empty; `device` is held while queued work runs, and
  // `order` draws which runnable work runs next.
  std::shared_ptr<Queue> legacy = std::make_shared<Queue>();
  std::vector<std::shared_ptr<Queue>> queues{legacy};
  std::recursive_mutex device;
  std::mt19937_64 order{0};
  bool order_seeded = false;
  int not_ready_percent = 25;
};

State& state() {
  static State instance;
  return instance;
}

thread_local cudaError_t last_error = cudaSuccess;
thread_local int current_device = 0;

cudaError_t result(cudaError_t code) {
  if (code != cudaSuccess) last_error = code;
  return code;
}

// Whether [ptr, ptr + bytes) lies inside one live allocation.
bool in_device_memory(const void* ptr, size_t bytes) {
  const char* p = static_cast<const char*>(ptr);
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.allocations.upper_bound(p);
  if (it == s.allocations.begin()) return false;
  --it;
  return p >= it->first && size_t(p - it->first) <= it->second &&
         bytes <= it->second - size_t(p - it->first);
}

// Streams and events: every handle made is kept until destroyed, so a stale
// or foreign handle is an error rather than a crash.
template <typename T>
bool is_live(const std::set<const T*>& live, const T* handle) {
  std::lock_guard lock(state().mutex);
  return handle && live.count(handle) > 0;
}

template <typename T>
cudaError_t add_handle(std::set<const T*>& live, T** out, T* handle) {
  std::lock_guard lock(state().mutex);
  live.insert(handle);
  *out = handle;
  return cudaSuccess;
}

template <typename T>
cudaError_t destroy_handle(std::set<const T*>& live, T* handle) {
  {
    std::lock_guard lock(state().mutex);
    if (!handle || live.erase(handle) == 0) return result(cudaErrorInvalidResourceHandle);
  }
  delete handle;
  return cudaSuccess;
}

bool event_is_live(cudaEvent_t event) {
  return is_live(state().events, event);
}

// The pinned allocation that holds [ptr, ptr + bytes): its base (null when
// none does) and its size.
const char* pinned_allocation(const void* ptr, size_t bytes, size_t* allocation_bytes) {
  const char* p = static_cast<const char*>(ptr);
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.pinned.upper_bound(p);
  if (it == s.pinned.begin()) return nullptr;
  --it;
  if (size_t(p - it->first) > it->second || bytes > it->second - size_t(p - it->first)) {
    return nullptr;
  }
  *allocation_bytes = it->second;
  return it->first;
}

bool is_pinned(const void* ptr, size_t bytes) {
  size_t allocation_bytes = 0;
  return pinned_allocation(ptr, bytes, &allocation_bytes) != nullptr;
}

}  // namespace

struct CUstream_st {
  unsigned flags = 0;
  std::shared_ptr<Queue> queue = std::make_shared<Queue>();
  // The capture this stream records into (its origin, or a stream that joined
  // it by waiting on an event recorded in it), and the work recorded on it.
  std::shared_ptr<Capture> capture;
  size_t recorded = 0;
  size_t joined_at = 0;  // `recorded` when the origin last waited on an event of this stream
};

struct CUevent_st {
  unsigned flags = 0;
  bool recorded = false;
  // The work its last record (outside a capture) follows, and the host time
  // at which that record ran.
  Mark mark;
  std::shared_ptr<std::chrono::steady_clock::time_point> time =
      std::make_shared<std::chrono::steady_clock::time_point>();
  // Recorded in a capture: which one, on which stream, after how much of its work.
  std::shared_ptr<Capture> capture;
  cudaStream_t stream = nullptr;
  size_t stream_recorded = 0;
};

namespace {

std::shared_ptr<Capture> capture_of(cudaStream_t stream) {
  if (!stream) return nullptr;
  std::lock_guard lock(state().mutex);
  return stream->capture;
}

// Whether a call that may synchronize, allocate or block is forbidden now:
// some capture in the global mode, or one of this thread's in the
// thread-local mode, is in progress. Such a call invalidates those captures.
bool unsafe_call_forbidden() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  bool forbidden = false;
  for (const std::shared_ptr<Capture>& capture : s.captures) {
    if (capture->mode == cudaStreamCaptureModeGlobal ||
        (capture->mode == cudaStreamCaptureModeThreadLocal &&
         capture->thread == std::this_thread::get_id())) {
      capture->invalidated = true;
      forbidden = true;
    }
  }
  return forbidden;
}

// Records `work` on capturing `stream`.
void record(cudaStream_t stream, std::function<void()> work) {
  std::lock_guard lock(state().mutex);
  stream->capture->graph->work.push_back(std::move(work));
  ++stream->recorded;
}

// ---- the queues -----------------------------------------------------------------
// A synchronizing call waits for marks: it runs the work they follow and
// what that work waits for in turn (nothing else), one piece at a time,
// drawn at random among the queues whose next needed piece has every mark
// it waits for reached: any order that keeps each stream's order and the
// events waited on. Work waits only for work queued before it, so while
// needed work remains, some of it is runnable.

// With state().mutex held.
bool reached(const Mark& mark) {
  return !mark.queue || mark.queue->done >= mark.count;
}

bool all_reached(const std::vector<Mark>& marks) {
  return std::all_of(marks.begin(), marks.end(), reached);
}

// How much of each queue's work must be done for `marks` to be reached,
// state().mutex held.
using Needed = std::map<const Queue*, uint64_t>;
Needed needed(std::vector<Mark> marks) {
  Needed need;
  while (!marks.empty()) {
    const Mark mark = std::move(marks.back());
    marks.pop_back();
    if (!mark.queue) continue;
    uint64_t& count = need[mark.queue.get()];
    for (uint64_t i = std::max(count, mark.queue->done); i < mark.count; ++i) {
      const std::vector<Mark>& after = mark.queue->pending[i - mark.queue->done].after;
      marks.insert(marks.end(), after.begin(), after.end());
    }
    count = std::max(count, mark.count);
  }
  return need;
}

// A number from the queues' random sequence (seeded from schedule_seed()),
// with state().mutex held.
uint64_t draw() {
  State& s = state();
  if (!s.order_seeded) {
    s.order.seed(mpiasr::emu::schedule_seed() ^ 0x51ea3u);
    s.order_seeded = true;
  }
  return s.order();
}

void drop_if_orphaned(const std::shared_ptr<Queue>& queue) {
  State& s = state();
  if (queue->orphaned && queue->pending.empty()) std::erase(s.queues, queue);
}

// Drops the work still queued on every stream, as a GPU whose kernel failed
// runs nothing more (CUDA's errors after a kernel fault are sticky): the
// failure propagates to the host, whose buffers that pending copies name may
// be gone by the next synchronizing call.
void discard_pending_work() {
  State& s = state();
  std::vector<int> guards;
  {
    std::lock_guard lock(s.mutex);
    for (const std::shared_ptr<Queue>& q : s.queues) {
      for (const Work& w : q->pending) guards.push_back(w.guard);
      q->done += q->pending.size();
      q->pending.clear();
    }
    std::erase_if(s.queues, [](const std::shared_ptr<Queue>& q) { return q->orphaned; });
  }
  for (int guard : guards) mpiasr::emu::detail::release_guard(guard);
}

// Runs one piece of the needed work that may run; false when none is left.
bool run_one(const Needed& need) {
  State& s = state();
  std::shared_ptr<Queue> queue;
  Work work;
  {
    std::lock_guard lock(s.mutex);
    std::vector<const std::shared_ptr<Queue>*> ready;
    for (const std::shared_ptr<Queue>& q : s.queues) {
      const auto it = need.find(q.get());
      if (it == need.end() || q->done >= it->second) continue;
      if (all_reached(q->pending.front().after)) ready.push_back(&q);
    }
    if (ready.empty()) return false;
    queue = *ready[draw() % ready.size()];
    work = std::move(queue->pending.front());
    queue->pending.pop_front();
  }
  const auto finish = [&] {
    mpiasr::emu::detail::release_guard(work.guard);
    std::lock_guard lock(s.mutex);
    ++queue->done;
    drop_if_orphaned(queue);
  };
  mpiasr::emu::detail::open_guard(work.guard);
  try {
    if (work.run) work.run();
  } catch (...) {
    finish();
    discard_pending_work();
    throw;
  }
  finish();
  return true;
}

// Runs queued work until every mark is reached, or `pieces` pieces of it.
void run_until(const std::vector<Mark>& marks, uint64_t pieces = UINT64_MAX) {
  State& s = state();
  std::lock_guard device(s.device);
  Needed need;
  {
    std::lock_guard lock(s.mutex);
    need = needed(marks);
  }
  for (uint64_t i = 0; i < pieces; ++i) {
    if (!run_one(need)) return;
  }
}

// The marks after all work queued on `stream` so far (the legacy default
// stream's: with the blocking streams', which it waits for), or on every
// stream when `stream` is null and `every` is set.
std::vector<Mark> stream_marks(cudaStream_t stream, bool every = false) {
  std::lock_guard lock(state().mutex);
  if (stream) return {Mark{stream->queue, stream->queue->queued}};
  std::vector<Mark> marks;
  for (const std::shared_ptr<Queue>& q : state().queues) {
    if (every || q->blocking || q == state().legacy) marks.push_back({q, q->queued});
  }
  return marks;
}

// The mark of `event`'s last record (none when it was never recorded).
std::vector<Mark> event_marks(cudaEvent_t event) {
  std::lock_guard lock(state().mutex);
  return {event->mark};
}

}  // namespace

void mpiasr::emu::detail::run_queued_work() {
  run_until(stream_marks(nullptr, true));
}

namespace {

// Queues `work` on `stream`, which is not capturing, and returns the mark
// after it. Work on the legacy default stream waits for the blocking
// streams' work queued before it and runs before this returns (the host
// does not get ahead of the legacy stream: tests launch there and read the
// results at once).
Mark enqueue(cudaStream_t stream, Work work) {
  State& s = state();
  Mark mark;
  {
    std::lock_guard lock(s.mutex);
    const std::shared_ptr<Queue>& queue = stream ? stream->queue : s.legacy;
    if (!stream) {
      for (const std::shared_ptr<Queue>& q : s.queues) {
        if (q->blocking) work.after.push_back({q, q->queued});
      }
    }
    queue->pending.push_back(std::move(work));
    mark = {queue, ++queue->queued};
  }
  if (!stream) run_until({mark});
  return mark;
}

}  // namespace

void mpiasr::emu::detail::queue_work(cudaStream_t stream, std::function<void()> work) {
  if (capture_of(stream)) return record(stream, std::move(work));
  enqueue(stream, Work{std::move(work), {}, -1});
}

namespace {

// A query of the work before `marks`: cudaSuccess once it is done. While it
// is not, a draw of not_ready_percent answers cudaErrorNotReady after
// running up to 3 pieces of it, as a GPU still busy would; else the work is
// run and the answer is cudaSuccess.
cudaError_t query(const std::vector<Mark>& marks) {
  State& s = state();
  bool not_ready = false;
  uint64_t pieces = 0;
  {
    std::lock_guard lock(s.mutex);
    if (all_reached(marks)) return cudaSuccess;
    not_ready = draw() % 100 < uint64_t(s.not_ready_percent);
    pieces = draw() % 4;
  }
  if (!not_ready) {
    run_until(marks);
    return cudaSuccess;
  }
  run_until(marks, pieces);
  return cudaErrorNotReady;
}

}  // namespace

mpiasr::emu::ApiCounts mpiasr::emu::api_counts() {
  const Counters& c = state().counts;
  ApiCounts counts;
  counts.launches = c.launches;
  counts.memsets = c.memsets;
  counts.copies = c.copies;
  counts.graph_launches = c.graph_launches;
  counts.graph_nodes_run = c.graph_nodes_run;
  counts.device_syncs = c.device_syncs;
  counts.stream_syncs = c.stream_syncs;
  counts.event_syncs = c.event_syncs;
  counts.blocking_copies = c.blocking_copies;
  return counts;
}

void mpiasr::emu::set_not_ready_percent(int percent) {
  std::lock_guard lock(state().mutex);
  state().not_ready_percent = std::clamp(percent, 0, 100);
}

void mpiasr::emu::reset_api_counts() {
  Counters& c = state().counts;
  for (std::atomic<uint64_t>* counter :
       {&c.launches, &c.memsets, &c.copies, &c.graph_launches, &c.graph_nodes_run, &c.device_syncs,
        &c.stream_syncs, &c.event_syncs, &c.blocking_copies}) {
    *counter = 0;
  }
}

namespace mpiasr::emu::detail {

void count_launch() {
  ++state().counts.launches;
}

}  // namespace mpiasr::emu::detail

namespace mpiasr::emu::detail {
bool stream_is_valid(cudaStream_t stream) {
  return stream == nullptr || is_live(state().streams, stream);
}
}  // namespace mpiasr::emu::detail

using mpiasr::emu::detail::stream_is_valid;

// ---- device -------------------------------------------------------------------

namespace {

// MPIASR_EMU_DEVICES, else 1: the devices every process of the emulation sees.
int device_count() {
  static const int count = [] {
    const char* value = std::getenv("MPIASR_EMU_DEVICES");
    if (!value || !*value) return 1;
    const int parsed = std::atoi(value);
    if (parsed < 1 || parsed > 64) {
      std::fprintf(stderr, "%s:%d: MPIASR_EMU_DEVICES=\"%s\" is not a number from 1 to 64\n",
                   __FILE__, __LINE__, value);
      std::exit(2);
    }
    return parsed;
  }();
  return count;
}

bool is_device(int device) {
  return device >= 0 && device < device_count();
}

}  // namespace

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return result(cudaErrorInvalidValue);
  *count = device_count();
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (!is_device(device)) return result(cudaErrorInvalidDevice);
  current_device = device;
  return cudaSuccess;
}

cudaError_t cudaGetDevice(int* device) {
  if (!device) return result(cudaErrorInvalidValue);
  *device = current_device;
  return cudaSuccess;
}

cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!prop) return result(cudaErrorInvalidValue);
  if (!is_device(device)) return result(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::strncpy(prop->name, mpiasr::emu::kPresentedName, sizeof prop->name - 1);
  prop->totalGlobalMem = mpiasr::emu::kPresentedBytes;
  prop->sharedMemPerBlock = size_t(48) << 10;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = 9;
  prop->minor = 0;
  prop->multiProcessorCount = 132;  // two OS threads run the blocks
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!value) return result(cudaErrorInvalidValue);
  if (!is_device(device)) return result(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrClockRate:
    case cudaDevAttrMemoryClockRate:
    case cudaDevAttrGlobalMemoryBusWidth:
      *value = 0;  // nothing is timed
      return cudaSuccess;
  }
  return result(cudaErrorInvalidValue);
}

cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int len, int device) {
  if (!bus_id || len < 1) return result(cudaErrorInvalidValue);
  if (!is_device(device)) return result(cudaErrorInvalidDevice);
  std::snprintf(bus_id, size_t(len), "0000:%02x:00.0", device + 1);
  return cudaSuccess;
}

cudaError_t cudaProfilerStart() {
  return cudaSuccess;
}

cudaError_t cudaProfilerStop() {
  return cudaSuccess;
}

cudaError_t cudaRuntimeGetVersion(int* version) {
  if (!version) return result(cudaErrorInvalidValue);
  *version = CUDART_VERSION;
  return cudaSuccess;
}

cudaError_t cudaDriverGetVersion(int* version) {
  if (!version) return result(cudaErrorInvalidValue);
  *version = 0;  // no driver
  return cudaSuccess;
}

cudaError_t cudaDeviceSynchronize() {
  if (unsafe_call_forbidden()) return result(cudaErrorStreamCaptureUnsupported);
  ++state().counts.device_syncs;
  mpiasr::emu::detail::run_queued_work();
  return cudaSuccess;
}

// ---- memory -------------------------------------------------------------------

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (!ptr) return result(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (unsafe_call_forbidden()) return result(cudaErrorStreamCaptureUnsupported);
  if (bytes == 0) return cudaSuccess;
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (bytes > mpiasr::emu::kDeviceBytes - s.allocated) return result(cudaErrorMemoryAllocation);
  // Exactly `bytes`, so AddressSanitizer sees an access one past the end.
  void* memory = nullptr;
  if (posix_memalign(&memory, 256, bytes) != 0) return result(cudaErrorMemoryAllocation);
  s.allocations[static_cast<const char*>(memory)] = bytes;
  s.allocated += bytes;
  mpiasr::emu::detail::track_allocation(memory, bytes);
  *ptr = memory;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  if (unsafe_call_forbidden()) return result(cudaErrorStreamCaptureUnsupported);
  mpiasr::emu::detail::run_queued_work();  // cudaFree synchronizes the device
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.allocations.find(static_cast<const char*>(ptr));
  if (it == s.allocations.end()) return result(cudaErrorInvalidValue);
  s.allocated -= it->second;
  s.allocations.erase(it);
  mpiasr::emu::detail::untrack_allocation(ptr);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (!free_bytes || !total_bytes) return result(cudaErrorInvalidValue);
  State& s = state();
  std::lock_guard lock(s.mutex);
  *total_bytes = mpiasr::emu::kPresentedBytes;
  *free_bytes = mpiasr::emu::kDeviceBytes - s.allocated;
  return cudaSuccess;
}

cudaError_t cudaMallocHost(void** ptr, size_t bytes) {
  return cudaHostAlloc(ptr, bytes, cudaHostAllocDefault);
}

cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned flags) {
  if (!ptr ||
      (flags & ~(cudaHostAllocPortable | cudaHostAllocMapped | cudaHostAllocWriteCombined))) {
    return result(cudaErrorInvalidValue);
  }
  *ptr = nullptr;
  if (unsafe_call_forbidden()) return result(cudaErrorStreamCaptureUnsupported);
  if (bytes == 0) return cudaSuccess;
  // Whole pages, so that guarding them while a copy is pending (pinned_guard.h)
  // touches no other memory.
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  void* memory = nullptr;
  if (posix_memalign(&memory, page, (bytes + page - 1) / page * page) != 0) {
    return result(cudaErrorMemoryAllocation);
  }
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.pinned[static_cast<const char*>(memory)] = bytes;
  *ptr = memory;
  return cudaSuccess;
}

cudaError_t cudaFreeHost(void* ptr) {
  if (!ptr) return cudaSuccess;
  if (unsafe_call_forbidden()) return result(cudaErrorStreamCaptureUnsupported);
  mpiasr::emu::detail::run_queued_work();  // cudaFreeHost synchronizes the device
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (s.pinned.erase(static_cast<const char*>(ptr)) == 0) return result(cudaErrorInvalidValue);
  std::free(ptr);
  return cudaSuccess;
}

namespace {

// A copy's checks; cudaSuccess when it may go ahead.
cudaError_t check_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  const bool device_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool device_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault || !dst || !src ||
      (device_dst && !in_device_memory(dst, bytes)) ||
      (device_src && !in_device_memory(src, bytes))) {
    return cudaErrorInvalidValue;
  }
  return cudaSuccess;
}

// A copy or a memset as the device does it: the bytes are written.
void copy_bytes(void* dst, const void* src, size_t bytes) {
  std::memmove(dst, src, bytes);
  mpiasr::emu::detail::mark_written(dst, bytes);
}

void set_bytes(void* ptr, int value, size_t bytes) {
  std::memset(ptr, value, bytes);
  mpiasr::emu::detail::mark_written(ptr, bytes);
}

// Whether a copy of `kind` touches host memory that is not pinned: the host
// then waits for it (CUDA stages pageable memory synchronously).
bool touches_pageable_memory(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (kind == cudaMemcpyHostToDevice) return !is_pinned(src, bytes);
  if (kind == cudaMemcpyDeviceToHost) return !is_pinned(dst, bytes);
  return false;
}

// Guards the pinned side of a copy queued on `stream` until it runs
// (pinned_guard.h); -1 when none is guarded.
int guard_copy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind, cudaStream_t stream) {
  const bool to_host = kind == cudaMemcpyDeviceToHost;
  if (!to_host && kind != cudaMemcpyHostToDevice) return -1;
  const void* host = to_host ? dst : src;
  size_t allocation_bytes = 0;
  const char* allocation = pinned_allocation(host, bytes, &allocation_bytes);
  if (!allocation) return -1;
  char copy[128];
  std::snprintf(copy, sizeof copy, "a cudaMemcpyAsync of %zu bytes %s on stream %p", bytes,
                to_host ? "from the device into it" : "out of it to the device",
                static_cast<void*>(stream));
  return mpiasr::emu::detail::guard_pinned(host, bytes, allocation, allocation_bytes, to_host,
                                           copy);
}

}  // namespace

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (!stream_is_valid(stream)) return result(cudaErrorInvalidResourceHandle);
  if (bytes == 0) return cudaSuccess;
  if (const cudaError_t error = check_copy(dst, src, bytes, kind); error != cudaSuccess) {
    return result(error);
  }
  ++state().counts.copies;
  if (touches_pageable_memory(dst, src, bytes, kind)) {
    if (capture_of(stream) || unsafe_call_forbidden()) {
      if (const std::shared_ptr<Capture> capture = capture_of(stream)) capture->invalidated = true;
      return result(cudaErrorStreamCaptureUnsupported);
    }
    ++state().counts.blocking_copies;
    const Mark copied = enqueue(stream, Work{[=] { copy_bytes(dst, src, bytes); }, {}, -1});
    run_until({copied});
    return cudaSuccess;
  }
  if (capture_of(stream)) {
    record(stream, [=] { copy_bytes(dst, src, bytes); });
    return cudaSuccess;
  }
  const int guard = stream ? guard_copy(dst, src, bytes, kind, stream) : -1;
  enqueue(stream, Work{[=] { copy_bytes(dst, src, bytes); }, {}, guard});
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  if (bytes == 0) return cudaSuccess;
  if (const cudaError_t error = check_copy(dst, src, bytes, kind); error != cudaSuccess) {
    return result(error);
  }
  if (unsafe_call_forbidden()) return result(cudaErrorStreamCaptureUnsupported);
  ++state().counts.copies;
  if (kind != cudaMemcpyDeviceToDevice) ++state().counts.blocking_copies;
  enqueue(nullptr, Work{[=] { copy_bytes(dst, src, bytes); }, {}, -1});
  return cudaSuccess;
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  if (!stream_is_valid(stream)) return result(cudaErrorInvalidResourceHandle);
  if (bytes == 0) return cudaSuccess;
  if (!in_device_memory(ptr, bytes)) return result(cudaErrorInvalidValue);
  ++state().counts.memsets;
  mpiasr::emu::detail::queue_work(stream, [=] { set_bytes(ptr, value, bytes); });
  return cudaSuccess;
}

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  if (unsafe_call_forbidden()) return result(cudaErrorStreamCaptureUnsupported);
  return cudaMemsetAsync(ptr, value, bytes, nullptr);
}

// ---- streams ------------------------------------------------------------------

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  if (!stream || (flags & ~cudaStreamNonBlocking)) return result(cudaErrorInvalidValue);
  auto* handle = new CUstream_st;
  handle->flags = flags;
  handle->queue->blocking = !(flags & cudaStreamNonBlocking);
  {
    std::lock_guard lock(state().mutex);
    state().queues.push_back(handle->queue);
  }
  return add_handle(state().streams, stream, handle);
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

// Work queued on the stream still runs; its queue goes once it has.
cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!is_live(state().streams, stream)) return result(cudaErrorInvalidResourceHandle);
  {
    std::lock_guard lock(state().mutex);
    stream->queue->orphaned = true;
    drop_if_orphaned(stream->queue);
  }
  return destroy_handle(state().streams, stream);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (!stream_is_valid(stream)) return result(cudaErrorInvalidResourceHandle);
  if (const std::shared_ptr<Capture> capture = capture_of(stream)) {
    capture->invalidated = true;
    return result(cudaErrorStreamCaptureUnsupported);
  }
  if (unsafe_call_forbidden()) return result(cudaErrorStreamCaptureUnsupported);
  ++state().counts.stream_syncs;
  run_until(stream_marks(stream));
  return cudaSuccess;
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (!stream_is_valid(stream)) return result(cudaErrorInvalidResourceHandle);
  if (const std::shared_ptr<Capture> capture = capture_of(stream)) {
    capture->invalidated = true;
    return result(cudaErrorStreamCaptureUnsupported);
  }
  return query(stream_marks(stream));
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  if (!stream_is_valid(stream) || !event_is_live(event)) {
    return result(cudaErrorInvalidResourceHandle);
  }
  if (flags != 0) return result(cudaErrorInvalidValue);
  State& s = state();
  Mark recorded;
  {
    std::lock_guard lock(s.mutex);
    if (event->capture && s.captures.count(event->capture)) {
      if (!stream) return cudaSuccess;
      if (!stream->capture) {
        stream->capture = event->capture;  // joins the capture
        stream->recorded = stream->joined_at = 0;
      } else if (stream == stream->capture->origin && event->stream != stream) {
        event->stream->joined_at = event->stream_recorded;  // joined back into the origin
      }
      return cudaSuccess;
    }
    // A graph does not wait for work outside it.
    if ((stream && stream->capture) || reached(event->mark)) return cudaSuccess;
    recorded = event->mark;
  }
  enqueue(stream, Work{{}, {std::move(recorded)}, -1});
  return cudaSuccess;
}

cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data) {
  if (!stream_is_valid(stream)) return result(cudaErrorInvalidResourceHandle);
  if (!fn) return result(cudaErrorInvalidValue);
  mpiasr::emu::detail::queue_work(stream, [fn, user_data] { fn(user_data); });
  return cudaSuccess;
}

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  if (!stream_is_valid(stream)) return result(cudaErrorInvalidResourceHandle);
  if (!stream || mode < cudaStreamCaptureModeGlobal || mode > cudaStreamCaptureModeRelaxed) {
    return result(cudaErrorInvalidValue);  // the legacy default stream cannot be captured
  }
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (stream->capture) return result(cudaErrorIllegalState);
  auto capture = std::make_shared<Capture>();
  capture->origin = stream;
  capture->mode = mode;
  capture->thread = std::this_thread::get_id();
  stream->capture = capture;
  stream->recorded = stream->joined_at = 0;
  s.captures.insert(std::move(capture));
  return cudaSuccess;
}

cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph) {
  if (!stream_is_valid(stream)) return result(cudaErrorInvalidResourceHandle);
  if (!graph) return result(cudaErrorInvalidValue);
  *graph = nullptr;
  State& s = state();
  std::lock_guard lock(s.mutex);
  const std::shared_ptr<Capture> capture = stream ? stream->capture : nullptr;
  if (!capture) return result(cudaErrorIllegalState);
  if (capture->origin != stream) return result(cudaErrorStreamCaptureUnmatched);
  bool unjoined = false;
  for (const CUstream_st* other : s.streams) {
    if (other->capture != capture || other == stream) continue;
    unjoined = unjoined || other->recorded != other->joined_at;
  }
  for (const CUstream_st* other : s.streams) {
    if (other->capture == capture) const_cast<CUstream_st*>(other)->capture = nullptr;
  }
  s.captures.erase(capture);
  if (capture->invalidated) return result(cudaErrorStreamCaptureInvalidated);
  if (unjoined) return result(cudaErrorStreamCaptureUnjoined);
  s.graphs.insert(capture->graph.get());
  *graph = capture->graph.release();
  return cudaSuccess;
}

cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status) {
  if (!stream_is_valid(stream)) return result(cudaErrorInvalidResourceHandle);
  if (!status) return result(cudaErrorInvalidValue);
  const std::shared_ptr<Capture> capture = capture_of(stream);
  *status = !capture               ? cudaStreamCaptureStatusNone
            : capture->invalidated ? cudaStreamCaptureStatusInvalidated
                                   : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

// ---- graphs -------------------------------------------------------------------

cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags) {
  if (!exec || flags != 0) return result(cudaErrorInvalidValue);
  if (!is_live(state().graphs, graph)) return result(cudaErrorInvalidResourceHandle);
  auto* instance = new CUgraphExec_st{graph->work};
  return add_handle(state().execs, exec, instance);
}

cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream) {
  if (!is_live(state().execs, exec) || !stream_is_valid(stream)) {
    return result(cudaErrorInvalidResourceHandle);
  }
  ++state().counts.graph_launches;
  if (capture_of(stream)) {  // a child graph of the capture
    record(stream, [exec] {
      for (const std::function<void()>& work : exec->work) work();
    });
    return cudaSuccess;
  }
  state().counts.graph_nodes_run += exec->work.size();
  enqueue(stream, Work{[exec] {
                         for (const std::function<void()>& work : exec->work) work();
                       },
                       {},
                       -1});
  return cudaSuccess;
}

cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count) {
  if (!count || nodes) return result(cudaErrorInvalidValue);  // only the count
  if (!is_live(state().graphs, graph)) return result(cudaErrorInvalidResourceHandle);
  *count = graph->work.size();
  return cudaSuccess;
}

cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  return destroy_handle(state().graphs, graph);
}

cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec) {
  return destroy_handle(state().execs, exec);
}

// ---- events -------------------------------------------------------------------

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  if (!event || (flags & ~cudaEventDisableTiming)) return result(cudaErrorInvalidValue);
  auto* handle = new CUevent_st;
  handle->flags = flags;
  return add_handle(state().events, event, handle);
}

cudaError_t cudaEventCreate(cudaEvent_t* event) {
  return cudaEventCreateWithFlags(event, cudaEventDefault);
}

cudaError_t cudaEventDestroy(cudaEvent_t event) {
  return destroy_handle(state().events, event);
}

cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
  if (!event_is_live(event) || !stream_is_valid(stream)) {
    return result(cudaErrorInvalidResourceHandle);
  }
  {
    std::lock_guard lock(state().mutex);
    if (stream && stream->capture) {  // a node of the capture, for others to wait on
      event->capture = stream->capture;
      event->stream = stream;
      event->stream_recorded = stream->recorded;
      return cudaSuccess;
    }
    event->capture = nullptr;
    event->recorded = true;
  }
  const Mark mark = enqueue(
      stream, Work{[time = event->time] { *time = std::chrono::steady_clock::now(); }, {}, -1});
  std::lock_guard lock(state().mutex);
  event->mark = mark;
  return cudaSuccess;
}

namespace {
// Whether `event` was last recorded in a capture that is still in progress.
bool recorded_in_capture(cudaEvent_t event) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return event->capture && s.captures.count(event->capture) > 0;
}
}  // namespace

cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (!event_is_live(event)) return result(cudaErrorInvalidResourceHandle);
  if (recorded_in_capture(event)) return result(cudaErrorCapturedEvent);
  return query(event_marks(event));
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event_is_live(event)) return result(cudaErrorInvalidResourceHandle);
  if (recorded_in_capture(event)) return result(cudaErrorCapturedEvent);
  if (unsafe_call_forbidden()) return result(cudaErrorStreamCaptureUnsupported);
  ++state().counts.event_syncs;
  run_until(event_marks(event));
  return cudaSuccess;
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms) return result(cudaErrorInvalidValue);
  if (!event_is_live(start) || !event_is_live(end) || !start->recorded || !end->recorded ||
      (start->flags & cudaEventDisableTiming) || (end->flags & cudaEventDisableTiming)) {
    return result(cudaErrorInvalidResourceHandle);
  }
  {
    std::lock_guard lock(state().mutex);
    if (!reached(start->mark) || !reached(end->mark)) return result(cudaErrorNotReady);
  }
  *ms = std::chrono::duration<float, std::milli>(*end->time - *start->time).count();
  return cudaSuccess;
}

// ---- errors -------------------------------------------------------------------

cudaError_t cudaGetLastError() {
  const cudaError_t error = last_error;
  last_error = cudaSuccess;
  return error;
}

cudaError_t cudaPeekAtLastError() {
  return last_error;
}

const char* cudaGetErrorName(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "cudaSuccess";
    case cudaErrorInvalidValue:
      return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation:
      return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidDevice:
      return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle:
      return "cudaErrorInvalidResourceHandle";
    case cudaErrorIllegalState:
      return "cudaErrorIllegalState";
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
    case cudaErrorStreamCaptureUnsupported:
      return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated:
      return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureUnmatched:
      return "cudaErrorStreamCaptureUnmatched";
    case cudaErrorStreamCaptureUnjoined:
      return "cudaErrorStreamCaptureUnjoined";
    case cudaErrorCapturedEvent:
      return "cudaErrorCapturedEvent";
  }
  return "cudaErrorUnknown";
}

// CUDA's own wording.
const char* cudaGetErrorString(cudaError_t error) {
  switch (error) {
    case cudaSuccess:
      return "no error";
    case cudaErrorInvalidValue:
      return "invalid argument";
    case cudaErrorMemoryAllocation:
      return "out of memory";
    case cudaErrorInvalidDevice:
      return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle:
      return "invalid resource handle";
    case cudaErrorIllegalState:
      return "the operation cannot be performed in the present state";
    case cudaErrorNotReady:
      return "device not ready";
    case cudaErrorStreamCaptureUnsupported:
      return "operation not permitted when stream is capturing";
    case cudaErrorStreamCaptureInvalidated:
      return "operation failed due to a previous error during capture";
    case cudaErrorStreamCaptureUnmatched:
      return "capture was not initiated in this stream";
    case cudaErrorStreamCaptureUnjoined:
      return "capturing stream has unjoined work";
    case cudaErrorCapturedEvent:
      return "operation not permitted on an event last recorded in a capturing stream";
  }
  return "unknown error";
}
