// Elementwise kernels: casts, scaled adds, padding masks, activations and
// dropout, one thread per element in grid-stride loops (dropout: one thread per
// Philox block of eight elements). Math per element, in float:
//   add_scaled      y = x + alpha r          accumulate_scaled  dy += alpha dx
//   relu / swish / glu and their gradients   from kernels/activations.h
//   dropout         x (bits(seed, offset + i) >= threshold(p) ? 1 / (1 - p) : 0),
//                   16 Philox bits per element (kernels/philox.h)
// Layouts: flat arrays of n; mask_padding [B, T, C]; GLU [N, 2C] -> [N, C]
// with the value half first and the gate half second.
#include "kernels/activations.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/philox.h"
#include "src/base/error.h"

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

__global__ void relu_forward_kernel(__half* out, const __half* inp, size_t n) {
  MPIASR_GRID_STRIDE(i, n) out[i] = to_half(relu(to_float(inp[i])));
}

__global__ void relu_backward_kernel(__half* dinp, const __half* dout, const __half* inp,
                                     size_t n) {
  MPIASR_GRID_STRIDE(i, n) dinp[i] = to_half(relu_grad(to_float(inp[i]), to_float(dout[i])));
}

__global__ void swish_forward_kernel(__half* out, const __half* inp, size_t n) {
  MPIASR_GRID_STRIDE(i, n) out[i] = to_half(swish(to_float(inp[i])));
}

__global__ void swish_backward_kernel(__half* dinp, const __half* dout, const __half* inp,
                                      size_t n) {
  MPIASR_GRID_STRIDE(i, n) dinp[i] = to_half(swish_grad(to_float(inp[i]), to_float(dout[i])));
}

__global__ void glu_forward_kernel(__half* out, const __half* inp, int N, int C) {
  const size_t n = size_t(N) * C;
  MPIASR_GRID_STRIDE(i, n) {
    const size_t row = i / size_t(C), c = i % size_t(C);
    const __half* a = inp + row * 2 * C;
    out[i] = to_half(glu(to_float(a[c]), to_float(a[C + c])));
  }
}

__global__ void glu_backward_kernel(__half* dinp, const __half* dout, const __half* inp, int N,
                                    int C) {
  const size_t n = size_t(N) * C;
  MPIASR_GRID_STRIDE(i, n) {
    const size_t row = i / size_t(C), c = i % size_t(C);
    const __half* a = inp + row * 2 * C;
    float da = 0.0f, db = 0.0f;
    glu_grad(to_float(a[c]), to_float(a[C + c]), to_float(dout[i]), &da, &db);
    dinp[row * 2 * C + c] = to_half(da);
    dinp[row * 2 * C + C + c] = to_half(db);
  }
}

// Thread j serves Philox block first_block + j: stream positions
// 8 (first_block + j) .. + 7, i.e. the elements g - offset of those positions g
// that lie in [offset, offset + n).
__global__ void dropout_kernel(__half* out, const __half* inp, float scale, uint32_t threshold,
                               uint64_t seed, uint64_t offset, size_t n, uint64_t first_block,
                               size_t blocks) {
  MPIASR_GRID_STRIDE(j, blocks) {
    const uint64_t block = first_block + j;
    uint32_t bits[kDropoutElementsPerBlock];
    dropout_block_bits(seed, block, bits);
    for (int e = 0; e < kDropoutElementsPerBlock; ++e) {
      const uint64_t g = block * kDropoutElementsPerBlock + uint64_t(e);
      if (g < offset || g - offset >= n) continue;
      const size_t i = size_t(g - offset);
      // x * 0 for a dropped element, as the CPU computes it (NaN and inf stay visible).
      out[i] = to_half(to_float(inp[i]) * (bits[e] >= threshold ? scale : 0.0f));
    }
  }
}

}  // namespace
}  // namespace cuda_kernels

using namespace cuda_kernels;

void cuda_cast(__half* dst, const float* src, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  cast_kernel<<<grid_for(n), kThreads, 0, stream>>>(dst, src, n);
  CUDA_CHECK_LAUNCH();
}

void cuda_cast(float* dst, const __half* src, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  cast_kernel<<<grid_for(n), kThreads, 0, stream>>>(dst, src, n);
  CUDA_CHECK_LAUNCH();
}

void cuda_add_scaled(__half* y, const __half* x, const __half* r, float alpha, size_t n,
                     cudaStream_t stream) {
  if (n == 0) return;
  add_scaled_kernel<<<grid_for(n), kThreads, 0, stream>>>(y, x, r, alpha, n);
  CUDA_CHECK_LAUNCH();
}

void cuda_accumulate_scaled(__half* dy, const __half* dx, float alpha, size_t n,
                            cudaStream_t stream) {
  if (n == 0) return;
  accumulate_scaled_kernel<<<grid_for(n), kThreads, 0, stream>>>(dy, dx, alpha, n);
  CUDA_CHECK_LAUNCH();
}

void cuda_mask_padding(__half* x, const int32_t* lengths, int B, int T, int C,
                       cudaStream_t stream) {
  const size_t n = size_t(B) * T * C;
  if (n == 0) return;
  mask_padding_kernel<<<grid_for(n), kThreads, 0, stream>>>(x, lengths, B, T, C);
  CUDA_CHECK_LAUNCH();
}

void cuda_relu_forward(__half* out, const __half* inp, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  relu_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, inp, n);
  CUDA_CHECK_LAUNCH();
}

void cuda_relu_backward(__half* dinp, const __half* dout, const __half* inp, size_t n,
                        cudaStream_t stream) {
  if (n == 0) return;
  relu_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(dinp, dout, inp, n);
  CUDA_CHECK_LAUNCH();
}

void cuda_swish_forward(__half* out, const __half* inp, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  swish_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, inp, n);
  CUDA_CHECK_LAUNCH();
}

void cuda_swish_backward(__half* dinp, const __half* dout, const __half* inp, size_t n,
                         cudaStream_t stream) {
  if (n == 0) return;
  swish_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(dinp, dout, inp, n);
  CUDA_CHECK_LAUNCH();
}

void cuda_glu_forward(__half* out, const __half* inp, int N, int C, cudaStream_t stream) {
  const size_t n = size_t(N) * C;
  if (n == 0) return;
  glu_forward_kernel<<<grid_for(n), kThreads, 0, stream>>>(out, inp, N, C);
  CUDA_CHECK_LAUNCH();
}

void cuda_glu_backward(__half* dinp, const __half* dout, const __half* inp, int N, int C,
                       cudaStream_t stream) {
  const size_t n = size_t(N) * C;
  if (n == 0) return;
  glu_backward_kernel<<<grid_for(n), kThreads, 0, stream>>>(dinp, dout, inp, N, C);
  CUDA_CHECK_LAUNCH();
}

void cuda_dropout(__half* out, const __half* inp, float p, uint64_t seed, uint64_t offset, size_t n,
                  cudaStream_t stream) {
  MPIASR_CHECK(p >= 0.0f && p <= 1.0f, "dropout probability " << p << " is outside [0, 1]");
  if (n == 0) return;
  if (p == 0.0f) {
    if (out != inp)
      CUDA_CHECK(cudaMemcpyAsync(out, inp, n * sizeof(__half), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  if (p == 1.0f) {
    CUDA_CHECK(cudaMemsetAsync(out, 0, n * sizeof(__half), stream));
    return;
  }
  // The same scale as the CPU backend's T(1) / (T(1) - T(p)) for T = float.
  const float scale = 1.0f / (1.0f - p);
  const uint64_t first_block = offset / kDropoutElementsPerBlock;
  const uint64_t end_block = (offset + n + kDropoutElementsPerBlock - 1) / kDropoutElementsPerBlock;
  const size_t blocks = size_t(end_block - first_block);
  dropout_kernel<<<grid_for(blocks), kThreads, 0, stream>>>(out, inp, scale, dropout_threshold(p),
                                                            seed, offset, n, first_block, blocks);
  CUDA_CHECK_LAUNCH();
}

}  // namespace mpiasr
