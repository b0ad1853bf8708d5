// Attention pieces around the cuBLAS score and context GEMMs.
//
// Rotary embedding (kernels/rope.h): the pair (x[i], x[i + Dh/2]) of a q or k
// head vector at frame t turns by the angle t 10000^(-2i/Dh); backward turns
// the gradient back (sine negated). One thread per (b, t, h, i < Dh/2): it
// rotates that pair of q and of k and copies v[i], v[i + Dh/2]. cos and sin
// come from tables [T, Dh/2] built once in double, like the CPU's.
//
// Masked softmax over the keys s < lengths[b] of each row of scores [B, H, T, T]:
//   p[s] = exp(x[s] - max) / sum_{s' < L} exp(x[s'] - max),  p[s >= L] = 0
//   backward: dx[s] = p[s] (dp[s] - sum_s' p[s'] dp[s'])
// One warp per row, float arithmetic, three passes (max, sum, write).
//
// Merge heads: ctx [B, H, T, Dh] <-> out [B, T, H, Dh], one thread per element.
#include <cmath>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/rope.h"
#include "src/base/error.h"

namespace mpiasr {

namespace cuda_kernels {
namespace {

constexpr int kRowsPerBlock = kThreads / kWarp;

__global__ void rope_table_kernel(float* cos_table, float* sin_table, int T, int Dh) {
  const int half = Dh / 2;
  const size_t n = size_t(T) * half;
  MPIASR_GRID_STRIDE(j, n) {
    const int t = int(j / size_t(half)), i = int(j % size_t(half));
    const double angle = rope_angle(t, i, Dh);
    cos_table[j] = float(cos(angle));
    sin_table[j] = float(sin(angle));
  }
}

// Rotates the pair (from[i], from[i + half]) by the angle with cosine c and
// sine s into (to[i], to[i + half]).
__device__ void rotate_pair(__half* to, const __half* from, int i, int half, float c, float s) {
  float y1 = 0.0f, y2 = 0.0f;
  rope_rotate(to_float(from[i]), to_float(from[i + half]), c, s, &y1, &y2);
  to[i] = to_half(y1);
  to[i + half] = to_half(y2);
}

__device__ void copy_pair(__half* to, const __half* from, int i, int half) {
  to[i] = from[i];
  to[i + half] = from[i + half];
}

// The indices of thread item j < B T H (Dh / 2): pair i of head h at frame t of
// utterance b, as offsets of the fused row [3, H, Dh] and of the head vectors.
struct RopeItem {
  int i, t;
  size_t fused_row, head;
};

__device__ RopeItem rope_item(size_t j, int T, int H, int Dh) {
  const int half = Dh / 2;
  const int i = int(j % size_t(half));
  size_t rest = j / size_t(half);
  const int h = int(rest % size_t(H));
  rest /= size_t(H);
  const int t = int(rest % size_t(T));
  const int b = int(rest / size_t(T));
  return {i, t, (size_t(b) * T + t) * 3 * H * Dh + size_t(h) * Dh,
          ((size_t(b) * H + h) * T + t) * Dh};
}

__global__ void qkv_split_rope_forward_kernel(__half* q, __half* k, __half* v, const __half* qkv,
                                              const float* cos_table, const float* sin_table, int B,
                                              int T, int H, int Dh) {
  const int half = Dh / 2;
  const size_t part = size_t(H) * Dh;  // q, k, v parts of a fused row
  const size_t n = size_t(B) * T * H * half;
  MPIASR_GRID_STRIDE(j, n) {
    const RopeItem it = rope_item(j, T, H, Dh);
    const float c = cos_table[size_t(it.t) * half + it.i];
    const float s = sin_table[size_t(it.t) * half + it.i];
    rotate_pair(q + it.head, qkv + it.fused_row, it.i, half, c, s);
    rotate_pair(k + it.head, qkv + it.fused_row + part, it.i, half, c, s);
    copy_pair(v + it.head, qkv + it.fused_row + 2 * part, it.i, half);
  }
}

__global__ void qkv_split_rope_backward_kernel(__half* dqkv, const __half* dq, const __half* dk,
                                               const __half* dv, const float* cos_table,
                                               const float* sin_table, int B, int T, int H,
                                               int Dh) {
  const int half = Dh / 2;
  const size_t part = size_t(H) * Dh;
  const size_t n = size_t(B) * T * H * half;
  MPIASR_GRID_STRIDE(j, n) {
    const RopeItem it = rope_item(j, T, H, Dh);
    const float c = cos_table[size_t(it.t) * half + it.i];
    const float s = -sin_table[size_t(it.t) * half + it.i];  // the inverse rotation
    rotate_pair(dqkv + it.fused_row, dq + it.head, it.i, half, c, s);
    rotate_pair(dqkv + it.fused_row + part, dk + it.head, it.i, half, c, s);
    copy_pair(dqkv + it.fused_row + 2 * part, dv + it.head, it.i, half);
  }
}

__global__ void masked_softmax_forward_kernel(__half* probs, const __half* scores,
                                              const int32_t* lengths, int B, int H, int T) {
  const int lane = threadIdx.x % kWarp;
  const size_t row = size_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= size_t(B) * H * T) return;
  const int valid = lengths[row / (size_t(H) * T)];
  const __half* x = scores + row * T;
  __half* p = probs + row * T;
  float max = -INFINITY;
  for (int s = lane; s < valid; s += kWarp) max = fmaxf(max, to_float(x[s]));
  max = warp_max(max);
  float sum = 0.0f;
  for (int s = lane; s < valid; s += kWarp) sum += expf(to_float(x[s]) - max);
  const float inv = 1.0f / warp_sum(sum);
  for (int s = lane; s < T; s += kWarp)
    p[s] = s < valid ? to_half(expf(to_float(x[s]) - max) * inv) : to_half(0.0f);
}

__global__ void masked_softmax_backward_kernel(__half* dscores, const __half* dprobs,
                                               const __half* probs, size_t rows, int T) {
  const int lane = threadIdx.x % kWarp;
  const size_t row = size_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= rows) return;
  const __half* p = probs + row * T;
  const __half* dp = dprobs + row * T;
  __half* dx = dscores + row * T;
  float dot = 0.0f;
  for (int s = lane; s < T; s += kWarp) dot += to_float(p[s]) * to_float(dp[s]);
  dot = warp_sum(dot);
  for (int s = lane; s < T; s += kWarp) dx[s] = to_half(to_float(p[s]) * (to_float(dp[s]) - dot));
}

// to_heads = false: out [B, T, H, Dh] from ctx [B, H, T, Dh]; true: the reverse.
__global__ void merge_heads_kernel(__half* dst, const __half* src, int B, int T, int H, int Dh,
                                   bool to_heads) {
  const size_t n = size_t(B) * T * H * Dh;
  MPIASR_GRID_STRIDE(j, n) {
    // j indexes the merged layout [B, T, H, Dh].
    const int d = int(j % size_t(Dh));
    size_t rest = j / size_t(Dh);
    const int h = int(rest % size_t(H));
    rest /= size_t(H);
    const int t = int(rest % size_t(T));
    const int b = int(rest / size_t(T));
    const size_t headed = ((size_t(b) * H + h) * T + t) * Dh + d;
    if (to_heads) {
      dst[headed] = src[j];
    } else {
      dst[j] = src[headed];
    }
  }
}

}  // namespace
}  // namespace cuda_kernels

using namespace cuda_kernels;

void cuda_rope_table(float* cos_table, float* sin_table, int T, int Dh, cudaStream_t stream) {
  MPIASR_CHECK(Dh % 2 == 0, "rotary embedding needs an even head size, got " << Dh);
  const size_t n = size_t(T) * (Dh / 2);
  if (n == 0) return;
  MPIASR_LAUNCH(rope_table_kernel, grid_for(n), kThreads, 0, stream, cos_table, sin_table, T, Dh);
}

void cuda_qkv_split_rope_forward(__half* q, __half* k, __half* v, const __half* qkv,
                                 const float* cos_table, const float* sin_table, int B, int T,
                                 int H, int Dh, cudaStream_t stream) {
  MPIASR_CHECK(Dh % 2 == 0, "rotary embedding needs an even head size, got " << Dh);
  const size_t n = size_t(B) * T * H * (Dh / 2);
  if (n == 0) return;
  MPIASR_LAUNCH(qkv_split_rope_forward_kernel, grid_for(n), kThreads, 0, stream, q, k, v, qkv,
                cos_table, sin_table, B, T, H, Dh);
}

void cuda_qkv_split_rope_backward(__half* dqkv, const __half* dq, const __half* dk,
                                  const __half* dv, const float* cos_table, const float* sin_table,
                                  int B, int T, int H, int Dh, cudaStream_t stream) {
  MPIASR_CHECK(Dh % 2 == 0, "rotary embedding needs an even head size, got " << Dh);
  const size_t n = size_t(B) * T * H * (Dh / 2);
  if (n == 0) return;
  MPIASR_LAUNCH(qkv_split_rope_backward_kernel, grid_for(n), kThreads, 0, stream, dqkv, dq, dk, dv,
                cos_table, sin_table, B, T, H, Dh);
}

void cuda_masked_softmax_forward(__half* probs, const __half* scores, const int32_t* lengths, int B,
                                 int H, int T, cudaStream_t stream) {
  const size_t rows = size_t(B) * H * T;
  if (rows == 0) return;
  const unsigned blocks = unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  MPIASR_LAUNCH(masked_softmax_forward_kernel, blocks, kThreads, 0, stream, probs, scores, lengths,
                B, H, T);
}

void cuda_masked_softmax_backward(__half* dscores, const __half* dprobs, const __half* probs, int B,
                                  int H, int T, cudaStream_t stream) {
  const size_t rows = size_t(B) * H * T;
  if (rows == 0) return;
  const unsigned blocks = unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  MPIASR_LAUNCH(masked_softmax_backward_kernel, blocks, kThreads, 0, stream, dscores, dprobs, probs,
                rows, T);
}

void cuda_merge_heads_forward(__half* out, const __half* ctx, int B, int T, int H, int Dh,
                              cudaStream_t stream) {
  const size_t n = size_t(B) * T * H * Dh;
  if (n == 0) return;
  MPIASR_LAUNCH(merge_heads_kernel, grid_for(n), kThreads, 0, stream, out, ctx, B, T, H, Dh, false);
}

void cuda_merge_heads_backward(__half* dctx, const __half* dout, int B, int T, int H, int Dh,
                               cudaStream_t stream) {
  const size_t n = size_t(B) * T * H * Dh;
  if (n == 0) return;
  MPIASR_LAUNCH(merge_heads_kernel, grid_for(n), kThreads, 0, stream, dctx, dout, B, T, H, Dh,
                true);
}

}  // namespace mpiasr
