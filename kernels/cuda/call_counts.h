// Counts of what the CUDA backend asks of the device, in both builds (nvcc
// and the SIMT emulator), for the benchmarks and tests that say how a
// training step uses the GPU (DESIGN.md "A step without host synchronization"):
//
//   launches    kernels launched by MPIASR_LAUNCH and cuBLAS GEMMs (one each),
//               not counting those recorded into a step graph
//   graph_launches  step graphs launched (kernels/cuda/step_graph.h)
//   host_waits  times the host waited for the device: stream and event
//               synchronizations, blocking reads back
//   gemm_calls              cuda_gemm calls (gemm.cpp), dry passes included
//   gemm_descriptors        cuBLASLt descriptors created (matmul, layouts,
//                           preference: five per GEMM plan)
//   gemm_heuristic_queries  cublasLtMatmulAlgoGetHeuristic calls
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
  uint64_t gemm_calls = 0;
  uint64_t gemm_descriptors = 0;
  uint64_t gemm_heuristic_queries = 0;
};

namespace cuda_detail {
inline std::atomic<uint64_t> launch_count{0};
inline std::atomic<uint64_t> host_wait_count{0};
inline std::atomic<uint64_t> graph_launch_count{0};
inline std::atomic<uint64_t> gemm_call_count{0};
inline std::atomic<uint64_t> gemm_descriptor_count{0};
inline std::atomic<uint64_t> gemm_heuristic_query_count{0};
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
inline void count_gemm_call() {
  gemm_call_count.fetch_add(1, std::memory_order_relaxed);
}
inline void count_gemm_descriptors(uint64_t created) {
  gemm_descriptor_count.fetch_add(created, std::memory_order_relaxed);
}
inline void count_gemm_heuristic_query() {
  gemm_heuristic_query_count.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace cuda_detail

inline CudaCallCounts cuda_call_counts() {
  return {cuda_detail::launch_count.load(std::memory_order_relaxed),
          cuda_detail::host_wait_count.load(std::memory_order_relaxed),
          cuda_detail::graph_launch_count.load(std::memory_order_relaxed),
          cuda_detail::gemm_call_count.load(std::memory_order_relaxed),
          cuda_detail::gemm_descriptor_count.load(std::memory_order_relaxed),
          cuda_detail::gemm_heuristic_query_count.load(std::memory_order_relaxed)};
}

inline void reset_cuda_call_counts() {
  cuda_detail::launch_count.store(0, std::memory_order_relaxed);
  cuda_detail::host_wait_count.store(0, std::memory_order_relaxed);
  cuda_detail::graph_launch_count.store(0, std::memory_order_relaxed);
  cuda_detail::gemm_call_count.store(0, std::memory_order_relaxed);
  cuda_detail::gemm_descriptor_count.store(0, std::memory_order_relaxed);
  cuda_detail::gemm_heuristic_query_count.store(0, std::memory_order_relaxed);
}

}  // namespace mpiasr
