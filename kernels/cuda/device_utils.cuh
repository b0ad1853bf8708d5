// Device helpers shared by the CUDA kernels: launch sizes for grid-stride
// loops, conversions between float and the 16-bit storage types, 128-bit
// packs of eight 16-bit values, loop unrolling, and warp reductions (butterfly shuffles, so
// every lane ends with the result and the order is fixed: deterministic).
//
// Storage types: activations are __half (fp16-mixed) or __nv_bfloat16
// (bf16-mixed); kernels are templates over that type T, load it with
// to_float, compute in float and store with from_float<T> (one rounding).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "kernels/cuda/launch.h"
#include "kernels/philox.h"

// Unrolls the loop that follows: wholly with nvcc, up to 16 times with the
// emulator's host compiler. For loops over a thread's register arrays,
// whose indices must be known at compile time to stay in registers.
#if defined(__CUDACC__)
#define MPIASR_UNROLL _Pragma("unroll")
#else
#define MPIASR_UNROLL _Pragma("GCC unroll 16")
#endif

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
__device__ inline float to_float(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
__device__ inline float to_float(float x) {
  return x;
}

// x rounded to nearest even in T.
template <typename T>
__device__ inline T from_float(float x);
template <>
__device__ inline __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ inline float from_float<float>(float x) {
  return x;
}

// Eight 16-bit values moved as one 128-bit load or store (uint4), for
// pointers aligned to 16 bytes; `packed(p, n)` says whether p and n allow it.
constexpr int kPack = 8;

template <typename T>
struct alignas(16) Pack {
  static_assert(sizeof(T) == 2, "a pack holds eight 16-bit values");
  T v[kPack];
};

template <typename T>
__device__ inline Pack<T> load_pack(const T* p) {
  const uint4 bits = *reinterpret_cast<const uint4*>(p);
  Pack<T> pack;
  memcpy(&pack, &bits, sizeof pack);
  return pack;
}

template <typename T>
__device__ inline void store_pack(T* p, const Pack<T>& pack) {
  uint4 bits;
  memcpy(&bits, &pack, sizeof bits);
  *reinterpret_cast<uint4*>(p) = bits;
}

// Whether the pointer is 16-byte aligned and n a whole number of packs.
inline bool packed(const void* p, size_t n) {
  return reinterpret_cast<uintptr_t>(p) % 16 == 0 && n % kPack == 0;
}

// Width (1 or kPack) consecutive values at p as floats, and back (rounded to
// T once): one 128-bit access for a pack, a plain one for a single value.
template <int Width, typename T>
__device__ inline void load_floats(const T* p, float* x) {
  if constexpr (Width == kPack) {
    const Pack<T> pack = load_pack(p);
    for (int e = 0; e < kPack; ++e) x[e] = to_float(pack.v[e]);
  } else {
    x[0] = to_float(p[0]);
  }
}

template <int Width, typename T>
__device__ inline void store_floats(T* p, const float* x) {
  if constexpr (Width == kPack) {
    Pack<T> pack;
    for (int e = 0; e < kPack; ++e) pack.v[e] = from_float<T>(x[e]);
    store_pack(p, pack);
  } else {
    p[0] = from_float<T>(x[0]);
  }
}

// A dropout site on the device (kernels/philox.h, the CPU's masks): element i
// of the site is kept when dropout_bits(*seed, offset + i) >= threshold and
// then scaled by keep_scale = 1 / (1 - p); p = 0 (seed null) keeps all.
// The seed is read from device memory, where the host puts each step's, so
// that a step graph replays with the step's seed (DESIGN.md "Step graphs").
// No padding: a kernel's struct argument is signed by its bytes (step_graph.h).
struct DropoutSite {
  const uint64_t* seed = nullptr;  // null when p = 0
  uint64_t offset = 0;
  uint32_t threshold = 0;
  float keep_scale = 1.0f;
};

// The site for probability p (on the host; p in [0, 1]; seed in device memory).
inline DropoutSite dropout_site(float p, const uint64_t* seed, uint64_t offset) {
  DropoutSite site;
  site.seed = p > 0.0f ? seed : nullptr;
  site.offset = offset;
  site.threshold = dropout_threshold(p);
  site.keep_scale = p < 1.0f ? 1.0f / (1.0f - p) : 0.0f;
  return site;
}

// The factors (keep_scale or 0) of the Width elements from element i of the
// site; for a pack, offset + i is a multiple of 8, so one Philox block serves.
template <int Width>
__device__ inline void dropout_factors(const DropoutSite& site, size_t i, float* factor) {
  if (!site.seed) {
    for (int e = 0; e < Width; ++e) factor[e] = 1.0f;
    return;
  }
  if constexpr (Width == kPack) {
    uint32_t bits[kDropoutElementsPerBlock];
    dropout_block_bits(*site.seed, (site.offset + i) / kDropoutElementsPerBlock, bits);
    for (int e = 0; e < kPack; ++e) factor[e] = bits[e] >= site.threshold ? site.keep_scale : 0.0f;
  } else {
    factor[0] =
        dropout_bits(*site.seed, site.offset + i) >= site.threshold ? site.keep_scale : 0.0f;
  }
}

static_assert(kDropoutElementsPerBlock == kPack, "a pack is one Philox block of dropout bits");

// Whether a site's elements can go in packs: its offset keeps packs on Philox blocks.
inline bool packed(const DropoutSite& site) {
  return site.offset % kDropoutElementsPerBlock == 0;
}

// out[i] = op(a[i], b[i]) for i < n, in float, one rounding to T; op is a
// functor with a __device__ float operator(). Whole
// packs go as 128-bit loads and stores when `packs` (every pointer aligned,
// n a whole number of packs: launch_map2's check), else element by element.
template <typename T, typename Op>
__global__ void map2_kernel(T* out, const T* a, const T* b, size_t n, bool packs, Op op) {
  if (packs) {
    MPIASR_GRID_STRIDE(p, n / kPack) {
      const Pack<T> x = load_pack(a + p * kPack), z = load_pack(b + p * kPack);
      Pack<T> y;
      for (int e = 0; e < kPack; ++e)
        y.v[e] = from_float<T>(op(to_float(x.v[e]), to_float(z.v[e])));
      store_pack(out + p * kPack, y);
    }
    return;
  }
  MPIASR_GRID_STRIDE(i, n) out[i] = from_float<T>(op(to_float(a[i]), to_float(b[i])));
}

template <typename T, typename Op>
void launch_map2(T* out, const T* a, const T* b, size_t n, Op op, cudaStream_t stream) {
  if (n == 0) return;
  const bool packs = packed(out, n) && packed(a, n) && packed(b, n);
  constexpr auto map2 = map2_kernel<T, Op>;
  MPIASR_LAUNCH(map2, grid_for(packs ? n / kPack : n), kThreads, 0, stream, out, a, b, n, packs,
                op);
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
