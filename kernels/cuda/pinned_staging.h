// PinnedStaging: host-to-device copies that neither wait for the device nor
// make it wait for the host. A copy from pageable host memory makes the host
// wait (CUDA stages it synchronously); this class copies the host data into a
// ring of pinned memory instead and queues the device copy from there on the
// caller's stream, recording an event after it. The host reuses a part of
// the ring only once the copy that last used it is done: a query, and a wait
// only when the host has queued a whole ring of copies that the device has
// not reached yet (counted, kernels/cuda/call_counts.h), which holds a host
// that runs ahead to a ring's worth of copies. A copy larger than half the
// ring goes in pieces of half the ring (parameter uploads at start-up).
//
//   ring_    pinned bytes [0, capacity)
//   head_    where the next copy's bytes start
//   fences_  the ring's parts with a copy queued from them, oldest first,
//            each with the event recorded after its copy
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <deque>

#include "kernels/cuda/cuda_resources.h"

namespace mpiasr {

class PinnedStaging {
 public:
  explicit PinnedStaging(size_t capacity);

  // Copies `bytes` from host_src to device_dst in `stream`'s order; host_src
  // may be reused when the call returns.
  void copy_to_device(void* device_dst, const void* host_src, size_t bytes, cudaStream_t stream);

  size_t capacity() const { return ring_.bytes(); }

 private:
  struct Fence {
    size_t begin = 0, end = 0;  // [begin, end) of the ring
    CudaEvent copied;
  };
  // Makes [begin, begin + bytes) of the ring free: drops the fences of done
  // copies and waits for those on it.
  void claim(size_t begin, size_t bytes);

  PinnedBuffer ring_;
  size_t head_ = 0;
  std::deque<Fence> fences_;
  std::deque<CudaEvent> spare_events_;
};

}  // namespace mpiasr
