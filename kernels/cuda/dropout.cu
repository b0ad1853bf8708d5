// Dropout with counter-based masks, one thread per Philox block of eight
// elements in a grid-stride loop:
//   out[i] = inp[i] (bits(seed, offset + i) >= threshold(p) ? 1 / (1 - p) : 0)
// with 16 Philox bits per element (kernels/philox.h), the same masks as the
// CPU backend's. Layout: flat arrays of n.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/launch.h"
#include "kernels/philox.h"
#include "src/base/error.h"

namespace mpiasr {

namespace cuda_kernels {
namespace {

// Thread j serves Philox block first_block + j: stream positions
// 8 (first_block + j) .. + 7, i.e. the elements g - offset of those positions g
// that lie in [offset, offset + n).
template <typename T>
__global__ void dropout_kernel(T* out, const T* inp, float scale, uint32_t threshold, uint64_t seed,
                               uint64_t offset, size_t n, uint64_t first_block, size_t blocks) {
  MPIASR_GRID_STRIDE(j, blocks) {
    const uint64_t block = first_block + j;
    uint32_t bits[kDropoutElementsPerBlock];
    dropout_block_bits(seed, block, bits);
    for (int e = 0; e < kDropoutElementsPerBlock; ++e) {
      const uint64_t g = block * kDropoutElementsPerBlock + uint64_t(e);
      if (g < offset || g - offset >= n) continue;
      const size_t i = size_t(g - offset);
      // x * 0 for a dropped element, as the CPU computes it (NaN and inf stay visible).
      out[i] = from_float<T>(to_float(inp[i]) * (bits[e] >= threshold ? scale : 0.0f));
    }
  }
}

}  // namespace
}  // namespace cuda_kernels

using namespace cuda_kernels;

template <typename T>
void cuda_dropout(T* out, const T* inp, float p, uint64_t seed, uint64_t offset, size_t n,
                  cudaStream_t stream) {
  MPIASR_CHECK(p >= 0.0f && p <= 1.0f, "dropout probability " << p << " is outside [0, 1]");
  if (n == 0) return;
  if (p == 0.0f) {
    if (out != inp)
      CUDA_CHECK(cudaMemcpyAsync(out, inp, n * sizeof(T), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  if (p == 1.0f) {
    CUDA_CHECK(cudaMemsetAsync(out, 0, n * sizeof(T), stream));
    return;
  }
  // The same scale as the CPU backend's T(1) / (T(1) - T(p)) for T = float.
  const float scale = 1.0f / (1.0f - p);
  const uint64_t first_block = offset / kDropoutElementsPerBlock;
  const uint64_t end_block = (offset + n + kDropoutElementsPerBlock - 1) / kDropoutElementsPerBlock;
  const size_t blocks = size_t(end_block - first_block);
  MPIASR_LAUNCH(dropout_kernel<T>, grid_for(blocks), kThreads, 0, stream, out, inp, scale,
                dropout_threshold(p), seed, offset, n, first_block, blocks);
}

template void cuda_dropout<__half>(__half*, const __half*, float, uint64_t, uint64_t, size_t,
                                   cudaStream_t);
template void cuda_dropout<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*, float, uint64_t,
                                          uint64_t, size_t, cudaStream_t);

}  // namespace mpiasr
