// DeviceArena: all of the CUDA backend's device memory, taken with ONE
// cudaMalloc when the backend is built and handed out by an OffsetAllocator
// (256-byte aligned ranges, first fit, freed ranges merged). Parameters,
// activations, the backend's scratch buffers and the cuBLAS workspace all come
// from it, so a training step never calls cudaMalloc or cudaFree (which
// synchronize the device).
#pragma once

#include <cstddef>

#include "kernels/cuda/offset_allocator.h"

namespace mpiasr {

class DeviceArena {
 public:
  // Reserves `capacity` bytes on the current device.
  explicit DeviceArena(size_t capacity);

  // The capacity that leaves `reserve_bytes` of a device's `free_bytes` free
  // for the CUDA context, NCCL's buffers and cuBLAS: the difference. Throws
  // Error(kUsage) when nothing would be left for the arena.
  static size_t capacity_for(size_t free_bytes, size_t reserve_bytes);
  ~DeviceArena();
  DeviceArena(const DeviceArena&) = delete;
  DeviceArena& operator=(const DeviceArena&) = delete;

  void* allocate(size_t bytes);
  // Gives back a pointer from allocate(); null is ignored.
  void release(void* ptr);

  size_t capacity() const { return allocator_.capacity(); }
  size_t used() const { return allocator_.used(); }
  size_t peak() const { return allocator_.peak(); }

 private:
  char* base_ = nullptr;
  OffsetAllocator allocator_;
};

}  // namespace mpiasr
