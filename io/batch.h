// A padded training batch in host memory, as the loader hands it to the
// trainer. Buffers are 64-byte aligned (pinnable) and reused between batches.
//
//   features        float [B, T, n_mels]    T = max frames in the batch;
//                                           rows t >= frame_lengths[b] are 0
//   frame_lengths   int32 [B]
//   targets         int32 [sum target_lengths], utterances concatenated,
//                   token ids (blank = 0 unused)
//   target_lengths  int32 [B]
#pragma once

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

namespace mpiasr {

// A growable array with 64-byte aligned storage that keeps its capacity when
// resized down, so a buffer reused across batches stops allocating.
template <typename T>
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  AlignedBuffer(AlignedBuffer&& other) noexcept { swap(other); }
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept {
    swap(other);
    return *this;
  }
  ~AlignedBuffer() { std::free(data_); }

  void resize(size_t n) {
    if (n > capacity_) {
      size_t bytes = ((n * sizeof(T) + 63) / 64) * 64;
      T* fresh = static_cast<T*>(std::aligned_alloc(64, bytes));
      if (!fresh) throw std::bad_alloc();
      std::free(data_);
      data_ = fresh;
      capacity_ = n;
    }
    size_ = n;
  }
  T* data() { return data_; }
  const T* data() const { return data_; }
  size_t size() const { return size_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }

 private:
  void swap(AlignedBuffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
    std::swap(capacity_, other.capacity_);
  }
  T* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

struct Batch {
  int batch_size = 0;  // B (utterances in this batch)
  int max_frames = 0;  // T
  int n_mels = 80;
  AlignedBuffer<float> features;
  AlignedBuffer<int32_t> frame_lengths;
  AlignedBuffer<int32_t> targets;
  AlignedBuffer<int32_t> target_lengths;
  std::vector<size_t> utterance_indices;  // indices into the manifest
  double audio_seconds = 0;               // total duration of the batch's audio
};

}  // namespace mpiasr
