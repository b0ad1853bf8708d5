// Depthwise Conv1d over time with "same" padding (pad = (K - 1) / 2), masked
// at padding, on [B, T, C] (channels contiguous) with weight [C, K]:
//   y[b, t, c] = bias[c] + sum_k w[c, k] x[b, t + k - pad, c]   for t < L_b
//   (x[b, s, c] = 0 for s outside [0, L_b); y = 0 for t >= L_b)
// Backward, for s < L_b (0 elsewhere):
//   dx[b, s, c] = sum_k w[c, k] dy[b, s - k + pad, c]   over outputs t = s - k + pad < L_b
//   dw[c, k] += sum_{b, t < L_b} dy[b, t, c] x[b, t + k - pad, c]     db[c] += sum dy
// Forward and dx: one thread per (b, t, c), float accumulation. dw, db: the
// (K + 1) C sums are columns j = k C + c (k = K is the bias) summed over row
// chunks of the B T frames into partials [chunks, (K + 1) C], then added in
// chunk order: deterministic, no atomics.
#include "kernels/cuda/column_sums.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/depthwise_conv1d.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.h"
#include "src/base/error.h"

namespace mpiasr {

namespace cuda_kernels {
namespace {

template <typename T>
__global__ void depthwise_forward_kernel(T* out, const T* inp, const T* weight, const T* bias,
                                         const int32_t* lengths, int B, int T_, int C, int K) {
  const int pad = (K - 1) / 2;
  const size_t n = size_t(B) * T_ * C;
  MPIASR_GRID_STRIDE(j, n) {
    const int c = int(j % size_t(C));
    const size_t row = j / size_t(C);
    const int t = int(row % size_t(T_)), b = int(row / size_t(T_));
    const int valid = lengths[b];
    if (t >= valid) {
      out[j] = from_float<T>(0.0f);
      continue;
    }
    float acc = bias ? to_float(bias[c]) : 0.0f;
    const int k_begin = max(0, pad - t), k_end = min(K, valid - t + pad);
    for (int k = k_begin; k < k_end; ++k) {
      acc += to_float(weight[size_t(c) * K + k]) *
             to_float(inp[(size_t(b) * T_ + t + k - pad) * C + c]);
    }
    out[j] = from_float<T>(acc);
  }
}

template <typename T>
__global__ void depthwise_backward_input_kernel(T* dinp, const T* dout, const T* weight,
                                                const int32_t* lengths, int B, int T_, int C,
                                                int K) {
  const int pad = (K - 1) / 2;
  const size_t n = size_t(B) * T_ * C;
  MPIASR_GRID_STRIDE(j, n) {
    const int c = int(j % size_t(C));
    const size_t row = j / size_t(C);
    const int s = int(row % size_t(T_)), b = int(row / size_t(T_));
    const int valid = lengths[b];
    float acc = 0.0f;
    if (s < valid) {
      const int k_begin = max(0, s + pad - valid + 1), k_end = min(K, s + pad + 1);
      for (int k = k_begin; k < k_end; ++k) {
        acc += to_float(weight[size_t(c) * K + k]) *
               to_float(dout[(size_t(b) * T_ + s - k + pad) * C + c]);
      }
    }
    dinp[j] = from_float<T>(acc);
  }
}

// partials [chunks, (K + 1) C]: column j = k C + c of chunk `blockIdx.y`.
template <typename T>
__global__ void depthwise_param_partials_kernel(float* partials, const T* dout, const T* inp,
                                                const int32_t* lengths, int B, int T_, int C, int K,
                                                int rows_per_chunk) {
  const int cols = (K + 1) * C;
  const int j = blockIdx.x * blockDim.x + threadIdx.x;
  const int chunk = blockIdx.y;
  if (j >= cols) return;
  const int k = j / C, c = j % C, pad = (K - 1) / 2;
  const int rows = B * T_;
  const int begin = chunk * rows_per_chunk;
  const int end = begin + rows_per_chunk < rows ? begin + rows_per_chunk : rows;
  float sum = 0.0f;
  for (int r = begin; r < end; ++r) {
    const int b = r / T_, t = r % T_, valid = lengths[b];
    if (t >= valid) continue;
    const float dy = to_float(dout[size_t(r) * C + c]);
    if (k == K) {
      sum += dy;
      continue;
    }
    const int src = t + k - pad;
    if (src >= 0 && src < valid) sum += dy * to_float(inp[(size_t(b) * T_ + src) * C + c]);
  }
  partials[size_t(chunk) * cols + j] = sum;
}

// dweight [C, K] and dbias [C] += the partials of columns k C + c, in chunk order.
__global__ void depthwise_add_partials_kernel(float* dweight, float* dbias, const float* partials,
                                              int chunks, int C, int K) {
  const int cols = (K + 1) * C;
  MPIASR_GRID_STRIDE(j, cols) {
    const int k = int(j) / C, c = int(j) % C;
    float sum = 0.0f;
    for (int chunk = 0; chunk < chunks; ++chunk) sum += partials[size_t(chunk) * cols + j];
    if (k < K && dweight) dweight[size_t(c) * K + k] += sum;
    if (k == K && dbias) dbias[c] += sum;
  }
}

}  // namespace
}  // namespace cuda_kernels

using namespace cuda_kernels;

namespace {
void check_kernel_size(int K) {
  MPIASR_CHECK(K > 0 && K % 2 == 1, "depthwise conv1d needs an odd kernel size, got " << K);
}
}  // namespace

template <typename T>
void cuda_depthwise_conv1d_forward(T* out, const T* inp, const T* weight, const T* bias,
                                   const int32_t* lengths, int B, int T_, int C, int K,
                                   cudaStream_t stream) {
  check_kernel_size(K);
  const size_t n = size_t(B) * T_ * C;
  if (n == 0) return;
  MPIASR_LAUNCH(depthwise_forward_kernel<T>, grid_for(n), kThreads, 0, stream, out, inp, weight,
                bias, lengths, B, T_, C, K);
}

size_t depthwise_conv1d_partials(int B, int T_, int C, int K) {
  return size_t(column_chunks(int64_t(B) * T_)) * size_t(K + 1) * size_t(C);
}

template <typename T>
void cuda_depthwise_conv1d_backward(T* dinp, float* dweight, float* dbias, const T* dout,
                                    const T* inp, const T* weight, const int32_t* lengths, int B,
                                    int T_, int C, int K, float* partials, cudaStream_t stream) {
  check_kernel_size(K);
  const size_t n = size_t(B) * T_ * C;
  if (n == 0) return;
  if (dinp) {
    MPIASR_LAUNCH(depthwise_backward_input_kernel<T>, grid_for(n), kThreads, 0, stream, dinp, dout,
                  weight, lengths, B, T_, C, K);
  }
  if (!dweight && !dbias) return;
  const int rows = B * T_, chunks = column_chunks(rows);
  const int rows_per_chunk = (rows + chunks - 1) / chunks;
  const int cols = (K + 1) * C;
  const dim3 grid(unsigned((cols + kThreads - 1) / kThreads), unsigned(chunks));
  MPIASR_LAUNCH(depthwise_param_partials_kernel<T>, grid, kThreads, 0, stream, partials, dout, inp,
                lengths, B, T_, C, K, rows_per_chunk);
  MPIASR_LAUNCH(depthwise_add_partials_kernel, grid_for(size_t(cols)), kThreads, 0, stream, dweight,
                dbias, partials, chunks, C, K);
}

#define MPIASR_INSTANTIATE(T)                                                                      \
  template void cuda_depthwise_conv1d_forward<T>(T*, const T*, const T*, const T*, const int32_t*, \
                                                 int, int, int, int, cudaStream_t);                \
  template void cuda_depthwise_conv1d_backward<T>(T*, float*, float*, const T*, const T*,          \
                                                  const T*, const int32_t*, int, int, int, int,    \
                                                  float*, cudaStream_t);
MPIASR_INSTANTIATE(__half)
MPIASR_INSTANTIATE(__nv_bfloat16)
#undef MPIASR_INSTANTIATE

}  // namespace mpiasr
