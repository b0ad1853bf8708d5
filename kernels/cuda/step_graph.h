// The passes of a step queued as a CUDA graph (CudaBackend::queue_as_graph,
// DESIGN.md "Step graphs"), as seen by every place that puts work on a
// stream: MPIASR_LAUNCH, cuda_gemm, and the copies and memsets below.
//
//   kEager    the work is queued (the default)
//   kDry      nothing is queued; each piece of work is folded into the pass's
//             signature instead: the kernel (its call site), grid, block,
//             shared bytes and every argument: a number, an enum or a
//             pointer by its value, a struct by its bytes (it must have no
//             padding, whose bytes are indeterminate: checked at compile
//             time, kernels/cuda/padding_free.h), a struct without members
//             not at all
//   kCapture  the work is queued on a capturing stream and signed the same
//             way, so the capture can be checked against the dry pass
//
// Signature: FNV-1a over 64-bit words. The pass is per host thread.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "kernels/cuda/call_counts.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/padding_free.h"

namespace mpiasr {

enum class GraphPass { kEager, kDry, kCapture };

namespace cuda_detail {

inline thread_local GraphPass graph_pass = GraphPass::kEager;
inline thread_local uint64_t graph_signature = 0;

inline void sign_word(uint64_t word) {
  constexpr uint64_t kPrime = 0x100000001b3ull;
  for (int i = 0; i < 8; ++i) {
    graph_signature ^= (word >> (8 * i)) & 0xff;
    graph_signature *= kPrime;
  }
}

template <typename T>
void sign_argument(const T& value) {
  using V = std::remove_cvref_t<T>;
  if constexpr (std::is_pointer_v<V>) {
    sign_word(uint64_t(reinterpret_cast<uintptr_t>(value)));
  } else if constexpr (std::is_floating_point_v<V>) {
    sign_word(uint64_t(std::is_same_v<V, float> ? sizeof(float) : sizeof(double)));
    sign_word(std::bit_cast<uint64_t>(double(value)));
  } else if constexpr (std::is_integral_v<V> || std::is_enum_v<V>) {
    sign_word(uint64_t(value));
  } else if constexpr (!std::is_empty_v<V>) {
    static_assert(std::is_trivially_copyable_v<V>, "a kernel's struct argument is copied bytewise");
    static_assert(std::is_aggregate_v<V>, "a kernel's struct argument is a plain struct");
    // Padding bytes are indeterminate: they would sign the same work
    // differently in the dry pass and the capture. The compiler names V.
    static_assert(padding_free<V>,
                  "a kernel's struct argument has padding: order its members by width, or "
                  "pass a narrow one as an argument of its own");
    const auto* bytes = reinterpret_cast<const unsigned char*>(&value);
    for (size_t i = 0; i < sizeof(V); i += 8) {
      uint64_t word = 0;
      std::memcpy(&word, bytes + i, std::min<size_t>(8, sizeof(V) - i));
      sign_word(word);
    }
  }
}

inline void sign_dim(const dim3& d) {
  sign_word(d.x);
  sign_word(uint64_t(d.y) | uint64_t(d.z) << 32);
}

// Signs one piece of work, `site` naming what it is and where it is queued
// (a string literal); returns whether it must be queued (not a dry pass).
template <typename... Args>
bool sign_work(const char* site, const Args&... args) {
  if (graph_pass == GraphPass::kEager) return true;
  sign_word(uint64_t(reinterpret_cast<uintptr_t>(site)));
  (sign_argument(args), ...);
  return graph_pass != GraphPass::kDry;
}

template <typename... Args>
bool sign_launch(const char* site, dim3 grid, dim3 block, size_t shared_bytes,
                 const Args&... args) {
  if (graph_pass == GraphPass::kEager) return true;
  sign_dim(grid);
  sign_dim(block);
  return sign_work(site, shared_bytes, args...);
}

// Queues eagerly while it lives, whatever the pass (work done once and kept,
// such as tables, and a dry pass's uploads); the pass resumes after.
class EagerScope {
 public:
  EagerScope() : resumed_(graph_pass) { graph_pass = GraphPass::kEager; }
  ~EagerScope() { graph_pass = resumed_; }
  EagerScope(const EagerScope&) = delete;
  EagerScope& operator=(const EagerScope&) = delete;

 private:
  GraphPass resumed_;
};

// Counts a kernel or GEMM that was queued: not one a capture records (its
// graph's launches are counted instead).
inline void count_queued_launch() {
  if (graph_pass == GraphPass::kEager) count_launch();
}

}  // namespace cuda_detail

// cudaMemsetAsync to 0 and cudaMemcpyAsync between device buffers, through
// the pass: queued, or signed only.
inline void zero_async(void* ptr, size_t bytes, cudaStream_t stream) {
  if (!cuda_detail::sign_work("cudaMemsetAsync", ptr, bytes, stream)) return;
  CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, stream));
}

inline void copy_on_device_async(void* dst, const void* src, size_t bytes, cudaStream_t stream) {
  if (!cuda_detail::sign_work("cudaMemcpyAsync", dst, src, bytes, stream)) return;
  CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream));
}

}  // namespace mpiasr
