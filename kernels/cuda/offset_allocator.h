// OffsetAllocator: the bookkeeping of the device arena (device_arena.h), kept
// apart from CUDA so it is tested on any machine. It hands out byte ranges of
// [0, capacity), each starting at a multiple of kAlignment and rounded up to
// one, first fit from the lowest free offset; a freed range merges with free
// neighbours, so alternating sizes do not fragment the arena for good.
//
//   free_    offset -> size of every free range, no two adjacent
//   used_    offset -> size of every range handed out
#pragma once

#include <cstddef>
#include <map>

namespace mpiasr {

class OffsetAllocator {
 public:
  static constexpr size_t kAlignment = 256;

  explicit OffsetAllocator(size_t capacity);

  // The offset of a new range of at least `bytes` (a zero-byte request still
  // takes kAlignment); throws Error naming the request, the bytes in use, the
  // largest free range and the capacity when nothing fits.
  size_t allocate(size_t bytes);
  // Returns the range at `offset` (as allocate gave it) and its size; throws
  // Error for an offset that is not in use.
  size_t release(size_t offset);

  size_t capacity() const { return capacity_; }
  size_t used() const { return used_bytes_; }
  size_t peak() const { return peak_bytes_; }
  size_t largest_free() const;
  size_t allocations() const { return used_.size(); }

 private:
  size_t capacity_;
  size_t used_bytes_ = 0;
  size_t peak_bytes_ = 0;
  std::map<size_t, size_t> free_;
  std::map<size_t, size_t> used_;
};

}  // namespace mpiasr
