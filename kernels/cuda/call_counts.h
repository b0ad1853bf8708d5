// Counts of what the CUDA backend asks of the device, in both builds (nvcc
// and the SIMT emulator), for the benchmarks and tests that say how a
// training step uses the GPU (DESIGN.md "A step without host synchronization"):
//
//   launches    kernels launched by MPIASR_LAUNCH and cuBLAS GEMMs (one each),
//               not counting those recorded into a step graph
//   graph_launches  step graphs launched (kernels/cuda/step_graph.h)
//   host_waits  times the host waited for the device: stream and event
//               synchronizations, blocking reads back
//
// One relaxed atomic increment per launch. (The emulator's runtime also
// counts every CUDA call it receives, kernels/cuda_emu/runtime.h; tests
// check the two against each other.)
#pragma once

#include <atomic>
#include <cstdint>

namespace mpiasr {

struct CudaCallCounts {
  uint64_t launches = 0;
  uint64_t host_waits = 0;
  uint64_t graph_launches = 0;
};

namespace cuda_detail {
inline std::atomic<uint64_t> launch_count{0};
inline std::atomic<uint64_t> host_wait_count{0};
inline std::atomic<uint64_t> graph_launch_count{0};
// Called for work that is queued, not for work a capturing pass records.
inline void count_launch() {
  launch_count.fetch_add(1, std::memory_order_relaxed);
}
inline void count_graph_launch() {
  graph_launch_count.fetch_add(1, std::memory_order_relaxed);
}
inline void count_host_wait() {
  host_wait_count.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace cuda_detail

inline CudaCallCounts cuda_call_counts() {
  return {cuda_detail::launch_count.load(std::memory_order_relaxed),
          cuda_detail::host_wait_count.load(std::memory_order_relaxed),
          cuda_detail::graph_launch_count.load(std::memory_order_relaxed)};
}

inline void reset_cuda_call_counts() {
  cuda_detail::launch_count.store(0, std::memory_order_relaxed);
  cuda_detail::host_wait_count.store(0, std::memory_order_relaxed);
  cuda_detail::graph_launch_count.store(0, std::memory_order_relaxed);
}

}  // namespace mpiasr
