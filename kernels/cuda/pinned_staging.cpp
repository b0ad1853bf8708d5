// Host-to-device copies through a ring of pinned memory (see pinned_staging.h).
#include "kernels/cuda/pinned_staging.h"

#include <algorithm>
#include <cstring>

namespace mpiasr {

PinnedStaging::PinnedStaging(size_t capacity) : ring_(capacity) {
  MPIASR_CHECK(capacity >= 2, "pinned staging of " << capacity << " bytes");
}

void PinnedStaging::claim(size_t begin, size_t bytes) {
  const size_t end = begin + bytes;
  const auto in_the_way = [&] {
    return std::any_of(fences_.begin(), fences_.end(),
                       [&](const Fence& f) { return f.begin < end && begin < f.end; });
  };
  // Fences complete in the order they were queued (oldest first): drop the
  // done ones, then wait for the oldest until none lies in [begin, end).
  while (!fences_.empty() && (fences_.front().copied.done() || in_the_way())) {
    fences_.front().copied.wait();
    spare_events_.push_back(std::move(fences_.front().copied));
    fences_.pop_front();
  }
}

void PinnedStaging::copy_to_device(void* device_dst, const void* host_src, size_t bytes,
                                   cudaStream_t stream) {
  const size_t piece = capacity() / 2;
  for (size_t done = 0; done < bytes;) {
    const size_t n = std::min(piece, bytes - done);
    if (head_ + n > capacity()) head_ = 0;
    claim(head_, n);
    char* staging = ring_.data() + head_;
    std::memcpy(staging, static_cast<const char*>(host_src) + done, n);
    CUDA_CHECK(cudaMemcpyAsync(static_cast<char*>(device_dst) + done, staging, n,
                               cudaMemcpyHostToDevice, stream));
    Fence fence{head_, head_ + n, CudaEvent()};
    if (!spare_events_.empty()) {
      fence.copied = std::move(spare_events_.front());
      spare_events_.pop_front();
    }
    fence.copied.record(stream);
    fences_.push_back(std::move(fence));
    head_ += n;
    done += n;
  }
}

}  // namespace mpiasr
