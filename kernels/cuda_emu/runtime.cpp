// The CUDA runtime on the CPU (see runtime.h): allocations, streams and events
// are kept in registries so that every handle and device range is checked.
#include "kernels/cuda_emu/runtime.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <set>

namespace {

struct State {
  std::mutex mutex;
  std::map<const char*, size_t> allocations;  // base -> bytes
  size_t allocated = 0;
  std::set<const CUstream_st*> streams;
  std::set<const CUevent_st*> events;
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

}  // namespace

struct CUstream_st {
  unsigned flags;
};

struct CUevent_st {
  unsigned flags;
  bool recorded = false;
  std::chrono::steady_clock::time_point time;
};

namespace mpiasr::emu::detail {
bool stream_is_valid(cudaStream_t stream) {
  return stream == nullptr || is_live(state().streams, stream);
}
}  // namespace mpiasr::emu::detail

using mpiasr::emu::detail::stream_is_valid;

// ---- device -------------------------------------------------------------------

cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return result(cudaErrorInvalidValue);
  *count = 1;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  if (device != 0) return result(cudaErrorInvalidDevice);
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
  if (device != 0) return result(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::strncpy(prop->name, "mpiasr SIMT emulator (CPU)", sizeof prop->name - 1);
  prop->totalGlobalMem = mpiasr::emu::kDeviceBytes;
  prop->sharedMemPerBlock = size_t(48) << 10;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 0x7fffffff;
  prop->maxGridSize[1] = prop->maxGridSize[2] = 65535;
  prop->major = 8;
  prop->minor = 0;
  prop->multiProcessorCount = 2;  // the OS threads that run blocks
  return cudaSuccess;
}

cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  if (!value) return result(cudaErrorInvalidValue);
  if (device != 0) return result(cudaErrorInvalidDevice);
  switch (attr) {
    case cudaDevAttrClockRate:
    case cudaDevAttrMemoryClockRate:
    case cudaDevAttrGlobalMemoryBusWidth:
      *value = 0;  // nothing is timed
      return cudaSuccess;
  }
  return result(cudaErrorInvalidValue);
}

cudaError_t cudaDeviceSynchronize() {
  return cudaSuccess;
}

// ---- memory -------------------------------------------------------------------

cudaError_t cudaMalloc(void** ptr, size_t bytes) {
  if (!ptr) return result(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (bytes == 0) return cudaSuccess;
  State& s = state();
  std::lock_guard lock(s.mutex);
  if (bytes > mpiasr::emu::kDeviceBytes - s.allocated) return result(cudaErrorMemoryAllocation);
  // Exactly `bytes`, so AddressSanitizer sees an access one past the end.
  void* memory = nullptr;
  if (posix_memalign(&memory, 256, bytes) != 0) return result(cudaErrorMemoryAllocation);
  s.allocations[static_cast<const char*>(memory)] = bytes;
  s.allocated += bytes;
  *ptr = memory;
  return cudaSuccess;
}

cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  State& s = state();
  std::lock_guard lock(s.mutex);
  auto it = s.allocations.find(static_cast<const char*>(ptr));
  if (it == s.allocations.end()) return result(cudaErrorInvalidValue);
  s.allocated -= it->second;
  s.allocations.erase(it);
  std::free(ptr);
  return cudaSuccess;
}

cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  if (!free_bytes || !total_bytes) return result(cudaErrorInvalidValue);
  State& s = state();
  std::lock_guard lock(s.mutex);
  *total_bytes = mpiasr::emu::kDeviceBytes;
  *free_bytes = mpiasr::emu::kDeviceBytes - s.allocated;
  return cudaSuccess;
}

cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream) {
  if (!stream_is_valid(stream)) return result(cudaErrorInvalidResourceHandle);
  if (bytes == 0) return cudaSuccess;
  const bool device_dst = kind == cudaMemcpyHostToDevice || kind == cudaMemcpyDeviceToDevice;
  const bool device_src = kind == cudaMemcpyDeviceToHost || kind == cudaMemcpyDeviceToDevice;
  if (kind < cudaMemcpyHostToHost || kind > cudaMemcpyDefault || !dst || !src ||
      (device_dst && !in_device_memory(dst, bytes)) ||
      (device_src && !in_device_memory(src, bytes))) {
    return result(cudaErrorInvalidValue);
  }
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind) {
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}

cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream) {
  if (!stream_is_valid(stream)) return result(cudaErrorInvalidResourceHandle);
  if (bytes == 0) return cudaSuccess;
  if (!in_device_memory(ptr, bytes)) return result(cudaErrorInvalidValue);
  std::memset(ptr, value, bytes);
  return cudaSuccess;
}

cudaError_t cudaMemset(void* ptr, int value, size_t bytes) {
  return cudaMemsetAsync(ptr, value, bytes, nullptr);
}

// ---- streams ------------------------------------------------------------------

cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  if (!stream || (flags & ~cudaStreamNonBlocking)) return result(cudaErrorInvalidValue);
  return add_handle(state().streams, stream, new CUstream_st{flags});
}

cudaError_t cudaStreamCreate(cudaStream_t* stream) {
  return cudaStreamCreateWithFlags(stream, cudaStreamDefault);
}

cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  return destroy_handle(state().streams, stream);
}

cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  return stream_is_valid(stream) ? cudaSuccess : result(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaStreamQuery(cudaStream_t stream) {
  return cudaStreamSynchronize(stream);
}

cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags) {
  if (!stream_is_valid(stream) || !event_is_live(event)) {
    return result(cudaErrorInvalidResourceHandle);
  }
  return flags == 0 ? cudaSuccess : result(cudaErrorInvalidValue);
}

// ---- events -------------------------------------------------------------------

cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags) {
  if (!event || (flags & ~cudaEventDisableTiming)) return result(cudaErrorInvalidValue);
  return add_handle(state().events, event, new CUevent_st{flags, false, {}});
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
  event->recorded = true;
  event->time = std::chrono::steady_clock::now();
  return cudaSuccess;
}

// Recorded work is always done: it ran when it was queued.
cudaError_t cudaEventQuery(cudaEvent_t event) {
  return event_is_live(event) ? cudaSuccess : result(cudaErrorInvalidResourceHandle);
}

cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return cudaEventQuery(event);
}

cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms) return result(cudaErrorInvalidValue);
  if (!event_is_live(start) || !event_is_live(end) || !start->recorded || !end->recorded ||
      (start->flags & cudaEventDisableTiming) || (end->flags & cudaEventDisableTiming)) {
    return result(cudaErrorInvalidResourceHandle);
  }
  *ms = std::chrono::duration<float, std::milli>(end->time - start->time).count();
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
    case cudaErrorNotReady:
      return "cudaErrorNotReady";
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
    case cudaErrorNotReady:
      return "device not ready";
  }
  return "unknown error";
}
