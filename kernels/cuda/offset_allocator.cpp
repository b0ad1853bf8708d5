// First-fit range allocation with merging of free neighbours (see offset_allocator.h).
#include "kernels/cuda/offset_allocator.h"

#include <algorithm>
#include <iterator>

#include "src/base/error.h"

namespace mpiasr {

OffsetAllocator::OffsetAllocator(size_t capacity) : capacity_(capacity / kAlignment * kAlignment) {
  if (capacity_ > 0) free_[0] = capacity_;
}

size_t OffsetAllocator::largest_free() const {
  size_t largest = 0;
  for (const auto& [offset, size] : free_) largest = std::max(largest, size);
  return largest;
}

size_t OffsetAllocator::allocate(size_t bytes) {
  const size_t size = std::max<size_t>(1, (bytes + kAlignment - 1) / kAlignment) * kAlignment;
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < size) continue;
    const size_t offset = it->first, remaining = it->second - size;
    free_.erase(it);
    if (remaining > 0) free_[offset + size] = remaining;
    used_[offset] = size;
    used_bytes_ += size;
    peak_bytes_ = std::max(peak_bytes_, used_bytes_);
    return offset;
  }
  MPIASR_FAIL(ExitCode::kFailure, "device arena exhausted: " << bytes << " bytes requested, "
                                                             << used_bytes_ << " of " << capacity_
                                                             << " in use, largest free range "
                                                             << largest_free() << " bytes");
}

size_t OffsetAllocator::release(size_t offset) {
  auto it = used_.find(offset);
  MPIASR_CHECK(it != used_.end(),
               "device arena: release of offset " << offset << ", which is not in use");
  const size_t released = it->second;
  size_t begin = offset, size = released;
  used_bytes_ -= size;
  used_.erase(it);
  // Merge with the free range that ends at `begin` and the one that starts after it.
  auto next = free_.lower_bound(begin);
  if (next != free_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second == begin) {
      begin = prev->first;
      size += prev->second;
      free_.erase(prev);
    }
  }
  if (next != free_.end() && begin + size == next->first) {
    size += next->second;
    free_.erase(next);
  }
  free_[begin] = size;
  return released;
}

}  // namespace mpiasr
