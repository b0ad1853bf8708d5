// The activation arena: every buffer a training step touches (saved
// activations, scratch, gradients of activations) carved from ONE backend
// allocation that is planned before the first step, for the largest batch
// shape the model will see, so a step never allocates.
//
// Planning: layers call reserve<T>(count) while they are constructed and keep
// the returned slot (a byte offset). allocate() then makes the one allocation
// (zeroed), and get(slot) turns a slot into a pointer. Each slot starts at a
// multiple of 256 bytes. A buffer planned for [max_rows, C] is used as a dense
// [rows, C] prefix for a smaller batch.
#pragma once

#include <algorithm>
#include <cstddef>

#include "kernels/backend.h"
#include "src/base/error.h"

namespace mpiasr {

template <typename T>
struct ArenaSlot {
  size_t offset = 0;  // bytes from the arena's base
  size_t count = 0;   // elements of T
};

template <typename Act, typename Acc>
class ActivationArena {
 public:
  explicit ActivationArena(Backend<Act, Acc>& backend) : backend_(backend) {}
  ActivationArena(const ActivationArena&) = delete;
  ActivationArena& operator=(const ActivationArena&) = delete;
  ~ActivationArena() {
    if (base_) backend_.release(base_);
  }

  template <typename T>
  ArenaSlot<T> reserve(size_t count) {
    MPIASR_CHECK(base_ == nullptr,
                 "arena slot of " << count << " elements reserved after allocation");
    ArenaSlot<T> slot{bytes_, count};
    bytes_ += (count * sizeof(T) + 255) / 256 * 256;
    return slot;
  }

  void allocate() {
    MPIASR_CHECK(base_ == nullptr, "arena allocated twice");
    base_ = backend_.alloc(std::max<size_t>(bytes_, 256));
    backend_.zero(base_, std::max<size_t>(bytes_, 256));
  }

  template <typename T>
  T* get(ArenaSlot<T> slot) const {
    return reinterpret_cast<T*>(static_cast<char*>(base_) + slot.offset);
  }

  size_t bytes() const { return bytes_; }

 private:
  Backend<Act, Acc>& backend_;
  void* base_ = nullptr;
  size_t bytes_ = 0;
};

}  // namespace mpiasr
