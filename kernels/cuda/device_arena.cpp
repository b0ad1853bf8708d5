// One cudaMalloc carved by an OffsetAllocator (see device_arena.h).
//
// In the emulation build (MPIASR_CUDA_EMU) device memory is host memory under
// AddressSanitizer; the arena poisons every byte it has not handed out and a
// redzone of kRedzoneBytes after every allocation, so a kernel that indexes
// past its buffer stops with a report, even where the next allocation would
// sit flush against it. What it hands out is fresh device memory to the
// emulator (filled with NaN, never written for initcheck,
// kernels/cuda_emu/memory_check.h).
#include "kernels/cuda/device_arena.h"

#include <cuda_runtime.h>
#ifdef MPIASR_CUDA_EMU
#include <sanitizer/asan_interface.h>

#include "kernels/cuda_emu/memory_check.h"
#endif

#include "kernels/cuda/cuda_check.h"

namespace mpiasr {

namespace {

#ifdef MPIASR_CUDA_EMU
// A poisoned redzone after every allocation, so an overrun never lands in a
// neighbour.
constexpr size_t kRedzoneBytes = 256;
#else
constexpr size_t kRedzoneBytes = 0;
#endif

void set_usable(void* ptr, size_t bytes, bool usable) {
#ifdef MPIASR_CUDA_EMU
  if (usable) {
    ASAN_UNPOISON_MEMORY_REGION(ptr, bytes);
  } else {
    ASAN_POISON_MEMORY_REGION(ptr, bytes);
  }
#else
  (void)ptr, (void)bytes, (void)usable;
#endif
}

}  // namespace

DeviceArena::DeviceArena(size_t capacity) : allocator_(capacity) {
  MPIASR_CHECK(allocator_.capacity() > 0, "device arena of " << capacity << " bytes");
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&base_), allocator_.capacity()));
  set_usable(base_, allocator_.capacity(), false);
}

size_t DeviceArena::capacity_for(size_t free_bytes, size_t reserve_bytes) {
  if (free_bytes <= reserve_bytes) {
    constexpr double kMiB = 1 << 20;
    MPIASR_FAIL(ExitCode::kUsage,
                "the GPU has " << free_bytes / kMiB << " MiB free and " << reserve_bytes / kMiB
                               << " MiB are to stay free for the CUDA context, NCCL and cuBLAS "
                                  "(training.gpu_reserve_mb): nothing is left for the arena");
  }
  return free_bytes - reserve_bytes;
}

DeviceArena::~DeviceArena() {
  if (!base_) return;
  set_usable(base_, allocator_.capacity(), true);
  (void)cudaFree(base_);
}

void* DeviceArena::allocate(size_t bytes) {
  char* ptr = base_ + allocator_.allocate(bytes + kRedzoneBytes);
  set_usable(ptr, bytes, true);
#ifdef MPIASR_CUDA_EMU
  emu::detail::fresh_device_range(ptr, bytes);
#endif
  return ptr;
}

void DeviceArena::release(void* ptr) {
  if (!ptr) return;
  MPIASR_CHECK(
      static_cast<char*>(ptr) >= base_ && static_cast<char*>(ptr) < base_ + allocator_.capacity(),
      "device arena: release of " << ptr << ", which it did not allocate");
#ifdef MPIASR_CUDA_EMU
  // The poison is the host's, not stream-ordered: queued work that still
  // uses the range runs first.
  emu::detail::run_queued_work();
#endif
  set_usable(ptr, allocator_.release(size_t(static_cast<char*>(ptr) - base_)), false);
}

}  // namespace mpiasr
