// One cudaMalloc carved by an OffsetAllocator (see device_arena.h).
#include "kernels/cuda/device_arena.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"

namespace mpiasr {

DeviceArena::DeviceArena(size_t capacity) : allocator_(capacity) {
  MPIASR_CHECK(allocator_.capacity() > 0, "device arena of " << capacity << " bytes");
  CUDA_CHECK(cudaMalloc(reinterpret_cast<void**>(&base_), allocator_.capacity()));
}

DeviceArena::~DeviceArena() {
  if (base_) (void)cudaFree(base_);
}

void* DeviceArena::allocate(size_t bytes) {
  return base_ + allocator_.allocate(bytes);
}

void DeviceArena::release(void* ptr) {
  if (!ptr) return;
  MPIASR_CHECK(
      static_cast<char*>(ptr) >= base_ && static_cast<char*>(ptr) < base_ + allocator_.capacity(),
      "device arena: release of " << ptr << ", which it did not allocate");
  allocator_.release(size_t(static_cast<char*>(ptr) - base_));
}

}  // namespace mpiasr
