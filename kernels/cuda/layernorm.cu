// LayerNorm over the last dimension of x [N, C] (rows contiguous), as the CPU
// backend computes it, with float statistics:
//   mean = sum x / C    var = sum (x - mean)^2 / C    rstd = 1 / sqrt(var + eps)
//   xhat = (x - mean) rstd                             y = xhat w + b
// Backward, with g = dy w:
//   dx += rstd (g - mean_c(g) - xhat mean_c(g xhat))
//   dw += sum_rows dy xhat                             db += sum_rows dy
// Forward and the dx pass: one warp per row, two passes over the row (the
// second hits L1), lanes striding over C. dw and db: per-chunk column partials
// in float, then added in chunk order (deterministic; see column_sums.h).
#include "kernels/cuda/column_sums.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/layernorm.h"

namespace mpiasr {

namespace cuda_kernels {
namespace {

constexpr int kRowsPerBlock = kThreads / kWarp;

template <typename T>
__global__ void layernorm_forward_kernel(T* out, float* mean, float* rstd, const T* inp,
                                         const T* weight, const T* bias, int N, int C, float eps) {
  const int lane = threadIdx.x % kWarp;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= N) return;
  const T* x = inp + size_t(row) * C;
  T* y = out + size_t(row) * C;
  float sum = 0.0f;
  for (int c = lane; c < C; c += kWarp) sum += to_float(x[c]);
  const float m = warp_sum(sum) / float(C);
  float sum_sq = 0.0f;
  for (int c = lane; c < C; c += kWarp) {
    const float d = to_float(x[c]) - m;
    sum_sq += d * d;
  }
  const float r = 1.0f / sqrtf(warp_sum(sum_sq) / float(C) + eps);
  for (int c = lane; c < C; c += kWarp) {
    const float xhat = (to_float(x[c]) - m) * r;
    const float w = weight ? to_float(weight[c]) : 1.0f;
    const float b = bias ? to_float(bias[c]) : 0.0f;
    y[c] = from_float<T>(xhat * w + b);
  }
  if (lane == 0) {
    if (mean) mean[row] = m;
    if (rstd) rstd[row] = r;
  }
}

template <typename T>
__global__ void layernorm_backward_input_kernel(T* dinp, const T* dout, const T* inp,
                                                const T* weight, const float* mean,
                                                const float* rstd, int N, int C) {
  const int lane = threadIdx.x % kWarp;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= N) return;
  const T* x = inp + size_t(row) * C;
  const T* dy = dout + size_t(row) * C;
  T* dx = dinp + size_t(row) * C;
  const float m = mean[row], r = rstd[row];
  float sum_g = 0.0f, sum_g_xhat = 0.0f;
  for (int c = lane; c < C; c += kWarp) {
    const float g = to_float(dy[c]) * (weight ? to_float(weight[c]) : 1.0f);
    sum_g += g;
    sum_g_xhat += g * (to_float(x[c]) - m) * r;
  }
  const float mean_g = warp_sum(sum_g) / float(C);
  const float mean_g_xhat = warp_sum(sum_g_xhat) / float(C);
  for (int c = lane; c < C; c += kWarp) {
    const float g = to_float(dy[c]) * (weight ? to_float(weight[c]) : 1.0f);
    const float xhat = (to_float(x[c]) - m) * r;
    dx[c] = from_float<T>(to_float(dx[c]) + r * (g - mean_g - xhat * mean_g_xhat));
  }
}

// partials_w / partials_b [chunks, C]: sums over the chunk's rows of dy xhat and dy.
template <typename T>
__global__ void layernorm_param_partials_kernel(float* partials_w, float* partials_b, const T* dout,
                                                const T* inp, const float* mean, const float* rstd,
                                                int N, int C, int rows_per_chunk) {
  const int c = blockIdx.x * blockDim.x + threadIdx.x;
  const int chunk = blockIdx.y;
  if (c >= C) return;
  const int begin = chunk * rows_per_chunk;
  const int end = begin + rows_per_chunk < N ? begin + rows_per_chunk : N;
  float sum_w = 0.0f, sum_b = 0.0f;
  for (int n = begin; n < end; ++n) {
    const float dy = to_float(dout[size_t(n) * C + c]);
    sum_w += dy * (to_float(inp[size_t(n) * C + c]) - mean[n]) * rstd[n];
    sum_b += dy;
  }
  partials_w[size_t(chunk) * C + c] = sum_w;
  partials_b[size_t(chunk) * C + c] = sum_b;
}

}  // namespace
}  // namespace cuda_kernels

using namespace cuda_kernels;

template <typename T>
void cuda_layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                            const T* bias, int N, int C, float eps, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  const unsigned blocks = unsigned((N + kRowsPerBlock - 1) / kRowsPerBlock);
  MPIASR_LAUNCH(layernorm_forward_kernel<T>, blocks, kThreads, 0, stream, out, mean, rstd, inp,
                weight, bias, N, C, eps);
}

template <typename T>
void cuda_layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                             const T* weight, const float* mean, const float* rstd, int N, int C,
                             float* partials, cudaStream_t stream) {
  if (N <= 0 || C <= 0) return;
  if (dinp) {
    const unsigned blocks = unsigned((N + kRowsPerBlock - 1) / kRowsPerBlock);
    MPIASR_LAUNCH(layernorm_backward_input_kernel<T>, blocks, kThreads, 0, stream, dinp, dout, inp,
                  weight, mean, rstd, N, C);
  }
  if (!dweight && !dbias) return;
  const int chunks = column_chunks(N);
  const int rows_per_chunk = (N + chunks - 1) / chunks;
  float* partials_w = partials;
  float* partials_b = partials + size_t(chunks) * C;
  const dim3 grid(unsigned((C + kThreads - 1) / kThreads), unsigned(chunks));
  MPIASR_LAUNCH(layernorm_param_partials_kernel<T>, grid, kThreads, 0, stream, partials_w,
                partials_b, dout, inp, mean, rstd, N, C, rows_per_chunk);
  if (dweight) cuda_add_partials(dweight, partials_w, chunks, C, stream);
  if (dbias) cuda_add_partials(dbias, partials_b, chunks, C, stream);
}

#define MPIASR_INSTANTIATE(T)                                                                    \
  template void cuda_layernorm_forward<T>(T*, float*, float*, const T*, const T*, const T*, int, \
                                          int, float, cudaStream_t);                             \
  template void cuda_layernorm_backward<T>(T*, float*, float*, const T*, const T*, const T*,     \
                                           const float*, const float*, int, int, float*,         \
                                           cudaStream_t);
MPIASR_INSTANTIATE(__half)
MPIASR_INSTANTIATE(__nv_bfloat16)
#undef MPIASR_INSTANTIATE

}  // namespace mpiasr
