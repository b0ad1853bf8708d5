// GLU, then depthwise Conv1d over time with "same" padding (pad = (K - 1) /
// 2), masked at padding: the input is the pointwise projection p [B, T, 2C]
// (value half first), whose GLU g = p[..., c] sigmoid(p[..., C + c]) is
// computed where it is read and never stored; weight [C, K]:
//   y[b, t, c] = bias[c] + sum_k w[c, k] g[b, t + k - pad, c]   for t < L_b
//   (g[b, s, c] = 0 for s outside [0, L_b); y = 0 for t >= L_b)
// Backward, for s < L_b (dp = 0 elsewhere):
//   dg[b, s, c] = sum_k w[c, k] dy[b, s - k + pad, c]   over outputs t = s - k + pad < L_b
//   dp[b, s, c], dp[b, s, C + c] = GLU's gradients of (p[b, s, c], p[b, s, C + c]) times dg
//   dw[c, k] += sum_{b, t < L_b} dy[b, t, c] g[b, t + k - pad, c]     db[c] += sum dy
// g is computed once per element of a tile: a block of 256 threads takes 32
// channels (threads x = 0..31) and 64 frames of the B T rows; its 8 warps (y)
// write g of those frames and the K - 1 around them into shared memory, then
// convolve from there (forward), or multiply with dy (the weight gradient).
// dp: one thread per (b, s, c); GLU's gradient needs p at s alone. dw, db: the
// (K + 1) C sums are columns j = k C + c (k = K is the bias), each summed in
// row order over a chunk of the B T rows into partials [chunks, (K + 1) C],
// then added in chunk order: deterministic, no atomics. K <= kMaxKernel.
#include "kernels/activations.h"
#include "kernels/cuda/column_sums.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/depthwise_conv1d.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.h"
#include "src/base/error.h"

namespace mpiasr {

namespace cuda_kernels {
namespace {

// g of frame `row` ([B T] index), channel c, from the projection [B T, 2C].
template <typename T>
__device__ float gated(const T* inp, size_t row, int C, int c) {
  const T* p = inp + row * 2 * size_t(C) + c;
  return glu(to_float(p[0]), to_float(p[C]));
}

constexpr int kTileRows = 64, kTileChannels = 32, kTileWarps = 8;
constexpr int kMaxKernel = 63;
constexpr int kHaloRows = kTileRows + kMaxKernel - 1;

// g[i][x] = g of row first + i, channel c (0 outside [0, rows), at frames past
// their utterance's length and for c >= C), for i < count, by warp y.
template <typename T>
__device__ void load_gated_tile(float (&g)[kHaloRows][kTileChannels], const T* inp,
                                const int32_t* lengths, int64_t first, int count, int rows, int T_,
                                int C, int c, int x, int y) {
  for (int i = y; i < count; i += kTileWarps) {
    const int64_t row = first + i;
    float value = 0.0f;
    if (c < C && row >= 0 && row < rows) {
      const int b = int(row / T_), t = int(row % T_);
      if (t < lengths[b]) value = gated(inp, size_t(row), C, c);
    }
    g[i][x] = value;
  }
}

// grid (ceil(C / 32), ceil(B T / 64)), 256 threads.
template <typename T>
__global__ void depthwise_forward_kernel(T* out, const T* inp, const T* weight, const T* bias,
                                         const int32_t* lengths, int B, int T_, int C, int K) {
  MPIASR_SHARED(float[kHaloRows][kTileChannels], g);
  const int x = int(threadIdx.x) % kTileChannels, y = int(threadIdx.x) / kTileChannels;
  const int c = int(blockIdx.x) * kTileChannels + x, pad = (K - 1) / 2, rows = B * T_;
  const int64_t row0 = int64_t(blockIdx.y) * kTileRows;
  load_gated_tile(g, inp, lengths, row0 - pad, kTileRows + K - 1, rows, T_, C, c, x, y);
  __syncthreads();
  if (c >= C) return;
  for (int i = y; i < kTileRows && row0 + i < rows; i += kTileWarps) {
    const int64_t row = row0 + i;
    const int t = int(row % T_), valid = lengths[row / T_];
    if (t >= valid) {
      out[size_t(row) * C + c] = from_float<T>(0.0f);
      continue;
    }
    float acc = bias ? to_float(bias[c]) : 0.0f;
    // Tap k reads frame t + k - pad, tile row i + k.
    const int k_begin = max(0, pad - t), k_end = min(K, valid - t + pad);
    for (int k = k_begin; k < k_end; ++k) acc += to_float(weight[size_t(c) * K + k]) * g[i + k][x];
    out[size_t(row) * C + c] = from_float<T>(acc);
  }
}

// One thread per (b, s, c): dg, then both halves of dp.
template <typename T>
__global__ void depthwise_backward_input_kernel(T* dinp, const T* dout, const T* inp,
                                                const T* weight, const int32_t* lengths, int B,
                                                int T_, int C, int K) {
  const int pad = (K - 1) / 2;
  const size_t n = size_t(B) * T_ * C;
  MPIASR_GRID_STRIDE(j, n) {
    const int c = int(j % size_t(C));
    const size_t row = j / size_t(C);
    const int s = int(row % size_t(T_)), b = int(row / size_t(T_));
    const int valid = lengths[b];
    T* dp = dinp + row * 2 * size_t(C) + c;
    if (s >= valid) {
      dp[0] = dp[C] = from_float<T>(0.0f);
      continue;
    }
    float dg = 0.0f;
    const int k_begin = max(0, s + pad - valid + 1), k_end = min(K, s + pad + 1);
    for (int k = k_begin; k < k_end; ++k) {
      dg += to_float(weight[size_t(c) * K + k]) *
            to_float(dout[(size_t(b) * T_ + s - k + pad) * C + c]);
    }
    const T* p = inp + row * 2 * size_t(C) + c;
    float da = 0.0f, db = 0.0f;
    glu_grad(to_float(p[0]), to_float(p[C]), dg, &da, &db);
    dp[0] = from_float<T>(da);
    dp[C] = from_float<T>(db);
  }
}

// partials [chunks, (K + 1) C]: column j = k C + c of chunk `blockIdx.y`;
// grid (ceil(C / 32), chunks), 256 threads: warp y sums the taps k = y, y + 8,
// ... of channel c over the chunk's rows, in tiles of 64 rows.
template <typename T>
__global__ void depthwise_param_partials_kernel(float* partials, const T* dout, const T* inp,
                                                const int32_t* lengths, int B, int T_, int C, int K,
                                                int rows_per_chunk) {
  MPIASR_SHARED(float[kHaloRows][kTileChannels], g);
  MPIASR_SHARED(float[kTileRows][kTileChannels], dy);
  MPIASR_SHARED(int[kTileRows][2], frame);  // t and the length of row i's utterance
  constexpr int kTapsPerWarp = (kMaxKernel + 1 + kTileWarps - 1) / kTileWarps;
  const int x = int(threadIdx.x) % kTileChannels, y = int(threadIdx.x) / kTileChannels;
  const int c = int(blockIdx.x) * kTileChannels + x, pad = (K - 1) / 2, rows = B * T_;
  const int begin = int(blockIdx.y) * rows_per_chunk;
  const int end = min(rows, begin + rows_per_chunk);
  float sums[kTapsPerWarp] = {};
  for (int row0 = begin; row0 < end; row0 += kTileRows) {
    const int count = min(kTileRows, end - row0);
    __syncthreads();  // the previous tile is used up
    load_gated_tile(g, inp, lengths, int64_t(row0) - pad, count + K - 1, rows, T_, C, c, x, y);
    for (int i = y; i < count; i += kTileWarps) {
      const int row = row0 + i, t = row % T_, valid = lengths[row / T_];
      dy[i][x] = c < C && t < valid ? to_float(dout[size_t(row) * C + c]) : 0.0f;
      if (x == 0) {
        frame[i][0] = t;
        frame[i][1] = valid;
      }
    }
    __syncthreads();
    for (int j = 0, k = y; k <= K; ++j, k += kTileWarps) {
      float sum = 0.0f;
      for (int i = 0; i < count; ++i) {
        if (k == K) {
          sum += dy[i][x];
          continue;
        }
        const int src = frame[i][0] + k - pad;
        if (src >= 0 && src < frame[i][1]) sum += dy[i][x] * g[i + k][x];
      }
      sums[j] += sum;
    }
  }
  if (c >= C) return;
  const int cols = (K + 1) * C;
  for (int j = 0, k = y; k <= K; ++j, k += kTileWarps) {
    partials[size_t(blockIdx.y) * cols + size_t(k) * C + c] = sums[j];
  }
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
  MPIASR_CHECK(
      K > 0 && K % 2 == 1 && K <= kMaxKernel,
      "depthwise conv1d needs an odd kernel size of at most " << kMaxKernel << ", got " << K);
}

dim3 tile_grid(int C, int row_tiles) {
  return dim3(unsigned((C + kTileChannels - 1) / kTileChannels), unsigned(row_tiles));
}
constexpr int kTileThreads = kTileChannels * kTileWarps;
}  // namespace

template <typename T>
void cuda_glu_depthwise_conv1d_forward(T* out, const T* inp, const T* weight, const T* bias,
                                       const int32_t* lengths, int B, int T_, int C, int K,
                                       cudaStream_t stream) {
  check_kernel_size(K);
  const size_t n = size_t(B) * T_ * C;
  if (n == 0) return;
  const int row_tiles = int((int64_t(B) * T_ + kTileRows - 1) / kTileRows);
  MPIASR_LAUNCH(depthwise_forward_kernel<T>, tile_grid(C, row_tiles), kTileThreads, 0, stream, out,
                inp, weight, bias, lengths, B, T_, C, K);
}

size_t glu_depthwise_conv1d_partials(int B, int T_, int C, int K) {
  return size_t(column_chunks(int64_t(B) * T_)) * size_t(K + 1) * size_t(C);
}

template <typename T>
void cuda_glu_depthwise_conv1d_backward(T* dinp, float* dweight, float* dbias, const T* dout,
                                        const T* inp, const T* weight, const int32_t* lengths,
                                        int B, int T_, int C, int K, float* partials,
                                        cudaStream_t stream) {
  check_kernel_size(K);
  const size_t n = size_t(B) * T_ * C;
  if (n == 0) return;
  if (dinp) {
    MPIASR_LAUNCH(depthwise_backward_input_kernel<T>, grid_for(n), kThreads, 0, stream, dinp, dout,
                  inp, weight, lengths, B, T_, C, K);
  }
  if (!dweight && !dbias) return;
  const int rows = B * T_, chunks = column_chunks(rows);
  const int rows_per_chunk = (rows + chunks - 1) / chunks;
  const int cols = (K + 1) * C;
  MPIASR_LAUNCH(depthwise_param_partials_kernel<T>, tile_grid(C, chunks), kTileThreads, 0, stream,
                partials, dout, inp, lengths, B, T_, C, K, rows_per_chunk);
  MPIASR_LAUNCH(depthwise_add_partials_kernel, grid_for(size_t(cols)), kThreads, 0, stream, dweight,
                dbias, partials, chunks, C, K);
}

#define MPIASR_INSTANTIATE(T)                                                                  \
  template void cuda_glu_depthwise_conv1d_forward<T>(                                          \
      T*, const T*, const T*, const T*, const int32_t*, int, int, int, int, cudaStream_t);     \
  template void cuda_glu_depthwise_conv1d_backward<T>(T*, float*, float*, const T*, const T*,  \
                                                      const T*, const int32_t*, int, int, int, \
                                                      int, float*, cudaStream_t);
MPIASR_INSTANTIATE(__half)
MPIASR_INSTANTIATE(__nv_bfloat16)
#undef MPIASR_INSTANTIATE

}  // namespace mpiasr
