// Device helpers shared by the CUDA kernels: launch sizes for grid-stride
// loops, half <-> float conversion and warp reductions (butterfly shuffles,
// so every lane ends with the result and the order is fixed: deterministic).
#pragma once

#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>

namespace mpiasr::cuda_kernels {

constexpr int kThreads = 256;  // threads per block of the elementwise kernels
constexpr int kWarp = 32;

// Blocks for a grid-stride loop over n items: enough to fill the device,
// never more than the items need.
inline unsigned grid_for(size_t n, int threads = kThreads) {
  const size_t blocks = (n + size_t(threads) - 1) / size_t(threads);
  const size_t cap = size_t(1) << 16;
  return unsigned(blocks == 0 ? 1 : (blocks < cap ? blocks : cap));
}

// for (size_t i : grid_stride(n)) — the index range of this thread.
#define MPIASR_GRID_STRIDE(i, n)                                                \
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < size_t(n); \
       i += size_t(gridDim.x) * blockDim.x)

__device__ inline float to_float(__half x) {
  return __half2float(x);
}
__device__ inline float to_float(float x) {
  return x;
}
__device__ inline __half to_half(float x) {
  return __float2half_rn(x);
}

template <typename T>
__device__ inline T warp_sum(T value) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    value += __shfl_xor_sync(0xffffffffu, value, offset);
  return value;
}

__device__ inline float warp_max(float value) {
  for (int offset = kWarp / 2; offset > 0; offset /= 2)
    value = fmaxf(value, __shfl_xor_sync(0xffffffffu, value, offset));
  return value;
}

// Sum over a block of blockDim.x threads (a multiple of 32, at most 1024);
// every thread gets the result. `shared` holds 32 values; the call passes a
// barrier before it writes them, so consecutive calls may share the buffer.
template <typename T>
__device__ inline T block_sum(T value, T* shared) {
  const int lane = threadIdx.x % kWarp, warp = threadIdx.x / kWarp;
  const int warps = blockDim.x / kWarp;
  value = warp_sum(value);
  __syncthreads();
  if (lane == 0) shared[warp] = value;
  __syncthreads();
  T total = lane < warps ? shared[lane] : T(0);
  return warp_sum(total);
}

}  // namespace mpiasr::cuda_kernels
