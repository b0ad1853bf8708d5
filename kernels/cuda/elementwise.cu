// Elementwise kernels: casts, scaled adds and padding masks, one thread per
// element in grid-stride loops. Math per element, in float:
//   add_scaled      y = x + alpha r          accumulate_scaled  dy += alpha dx
// Layouts: flat arrays of n; mask_padding [B, T, C].
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch.h"

namespace mpiasr {

namespace cuda_kernels {
namespace {

__global__ void cast_kernel(__half* dst, const float* src, size_t n) {
  MPIASR_GRID_STRIDE(i, n) dst[i] = to_half(src[i]);
}

__global__ void cast_kernel(float* dst, const __half* src, size_t n) {
  MPIASR_GRID_STRIDE(i, n) dst[i] = to_float(src[i]);
}

__global__ void add_scaled_kernel(__half* y, const __half* x, const __half* r, float alpha,
                                  size_t n) {
  MPIASR_GRID_STRIDE(i, n) y[i] = to_half(to_float(x[i]) + alpha * to_float(r[i]));
}

__global__ void accumulate_scaled_kernel(__half* dy, const __half* dx, float alpha, size_t n) {
  MPIASR_GRID_STRIDE(i, n) dy[i] = to_half(to_float(dy[i]) + alpha * to_float(dx[i]));
}

__global__ void mask_padding_kernel(__half* x, const int32_t* lengths, int B, int T, int C) {
  const size_t n = size_t(B) * T * C;
  MPIASR_GRID_STRIDE(i, n) {
    const size_t row = i / size_t(C);
    const int b = int(row / size_t(T)), t = int(row % size_t(T));
    if (t >= lengths[b]) x[i] = to_half(0.0f);
  }
}

}  // namespace
}  // namespace cuda_kernels

using namespace cuda_kernels;

void cuda_cast(__half* dst, const float* src, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  MPIASR_LAUNCH(cast_kernel, grid_for(n), kThreads, 0, stream, dst, src, n);
}

void cuda_cast(float* dst, const __half* src, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  MPIASR_LAUNCH(cast_kernel, grid_for(n), kThreads, 0, stream, dst, src, n);
}

void cuda_add_scaled(__half* y, const __half* x, const __half* r, float alpha, size_t n,
                     cudaStream_t stream) {
  if (n == 0) return;
  MPIASR_LAUNCH(add_scaled_kernel, grid_for(n), kThreads, 0, stream, y, x, r, alpha, n);
}

void cuda_accumulate_scaled(__half* dy, const __half* dx, float alpha, size_t n,
                            cudaStream_t stream) {
  if (n == 0) return;
  MPIASR_LAUNCH(accumulate_scaled_kernel, grid_for(n), kThreads, 0, stream, dy, dx, alpha, n);
}

void cuda_mask_padding(__half* x, const int32_t* lengths, int B, int T, int C,
                       cudaStream_t stream) {
  const size_t n = size_t(B) * T * C;
  if (n == 0) return;
  MPIASR_LAUNCH(mask_padding_kernel, grid_for(n), kThreads, 0, stream, x, lengths, B, T, C);
}

}  // namespace mpiasr
