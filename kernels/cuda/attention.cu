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

__global__ void rope_table_kernel(float* cos_table, float* sin_table, int T_, int Dh) {
  const int half = Dh / 2;
  const size_t n = size_t(T_) * half;
  MPIASR_GRID_STRIDE(j, n) {
    const int t = int(j / size_t(half)), i = int(j % size_t(half));
    const double angle = rope_angle(t, i, Dh);
    cos_table[j] = float(cos(angle));
    sin_table[j] = float(sin(angle));
  }
}

// Rotates the pair (from[i], from[i + half]) by the angle with cosine c and
// sine s into (to[i], to[i + half]).
template <typename T>
__device__ void rotate_pair(T* to, const T* from, int i, int half, float c, float s) {
  float y1 = 0.0f, y2 = 0.0f;
  rope_rotate(to_float(from[i]), to_float(from[i + half]), c, s, &y1, &y2);
  to[i] = from_float<T>(y1);
  to[i + half] = from_float<T>(y2);
}

template <typename T>
__device__ void copy_pair(T* to, const T* from, int i, int half) {
  to[i] = from[i];
  to[i + half] = from[i + half];
}

// The indices of thread item j < B T_ H (Dh / 2): pair i of head h at frame t of
// utterance b, as offsets of the fused row [3, H, Dh] and of the head vectors.
struct RopeItem {
  int i, t;
  size_t fused_row, head;
};

__device__ RopeItem rope_item(size_t j, int T_, int H, int Dh) {
  const int half = Dh / 2;
  const int i = int(j % size_t(half));
  size_t rest = j / size_t(half);
  const int h = int(rest % size_t(H));
  rest /= size_t(H);
  const int t = int(rest % size_t(T_));
  const int b = int(rest / size_t(T_));
  return {i, t, (size_t(b) * T_ + t) * 3 * H * Dh + size_t(h) * Dh,
          ((size_t(b) * H + h) * T_ + t) * Dh};
}

template <typename T>
__global__ void qkv_split_rope_forward_kernel(T* q, T* k, T* v, const T* qkv,
                                              const float* cos_table, const float* sin_table, int B,
                                              int T_, int H, int Dh) {
  const int half = Dh / 2;
  const size_t part = size_t(H) * Dh;  // q, k, v parts of a fused row
  const size_t n = size_t(B) * T_ * H * half;
  MPIASR_GRID_STRIDE(j, n) {
    const RopeItem it = rope_item(j, T_, H, Dh);
    const float c = cos_table[size_t(it.t) * half + it.i];
    const float s = sin_table[size_t(it.t) * half + it.i];
    rotate_pair(q + it.head, qkv + it.fused_row, it.i, half, c, s);
    rotate_pair(k + it.head, qkv + it.fused_row + part, it.i, half, c, s);
    copy_pair(v + it.head, qkv + it.fused_row + 2 * part, it.i, half);
  }
}

template <typename T>
__global__ void qkv_split_rope_backward_kernel(T* dqkv, const T* dq, const T* dk, const T* dv,
                                               const float* cos_table, const float* sin_table,
                                               int B, int T_, int H, int Dh) {
  const int half = Dh / 2;
  const size_t part = size_t(H) * Dh;
  const size_t n = size_t(B) * T_ * H * half;
  MPIASR_GRID_STRIDE(j, n) {
    const RopeItem it = rope_item(j, T_, H, Dh);
    const float c = cos_table[size_t(it.t) * half + it.i];
    const float s = -sin_table[size_t(it.t) * half + it.i];  // the inverse rotation
    rotate_pair(dqkv + it.fused_row, dq + it.head, it.i, half, c, s);
    rotate_pair(dqkv + it.fused_row + part, dk + it.head, it.i, half, c, s);
    copy_pair(dqkv + it.fused_row + 2 * part, dv + it.head, it.i, half);
  }
}

template <typename T>
__global__ void masked_softmax_forward_kernel(T* probs, const T* scores, const int32_t* lengths,
                                              int B, int H, int T_) {
  const int lane = threadIdx.x % kWarp;
  const size_t row = size_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= size_t(B) * H * T_) return;
  const int valid = lengths[row / (size_t(H) * T_)];
  const T* x = scores + row * T_;
  T* p = probs + row * T_;
  float max = -INFINITY;
  for (int s = lane; s < valid; s += kWarp) max = fmaxf(max, to_float(x[s]));
  max = warp_max(max);
  float sum = 0.0f;
  for (int s = lane; s < valid; s += kWarp) sum += expf(to_float(x[s]) - max);
  const float inv = 1.0f / warp_sum(sum);
  for (int s = lane; s < T_; s += kWarp)
    p[s] = s < valid ? from_float<T>(expf(to_float(x[s]) - max) * inv) : from_float<T>(0.0f);
}

template <typename T>
__global__ void masked_softmax_backward_kernel(T* dscores, const T* dprobs, const T* probs,
                                               size_t rows, int T_) {
  const int lane = threadIdx.x % kWarp;
  const size_t row = size_t(blockIdx.x) * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= rows) return;
  const T* p = probs + row * T_;
  const T* dp = dprobs + row * T_;
  T* dx = dscores + row * T_;
  float dot = 0.0f;
  for (int s = lane; s < T_; s += kWarp) dot += to_float(p[s]) * to_float(dp[s]);
  dot = warp_sum(dot);
  for (int s = lane; s < T_; s += kWarp)
    dx[s] = from_float<T>(to_float(p[s]) * (to_float(dp[s]) - dot));
}

// to_heads = false: out [B, T_, H, Dh] from ctx [B, H, T_, Dh]; true: the reverse.
template <typename T>
__global__ void merge_heads_kernel(T* dst, const T* src, int B, int T_, int H, int Dh,
                                   bool to_heads) {
  const size_t n = size_t(B) * T_ * H * Dh;
  MPIASR_GRID_STRIDE(j, n) {
    // j indexes the merged layout [B, T_, H, Dh].
    const int d = int(j % size_t(Dh));
    size_t rest = j / size_t(Dh);
    const int h = int(rest % size_t(H));
    rest /= size_t(H);
    const int t = int(rest % size_t(T_));
    const int b = int(rest / size_t(T_));
    const size_t headed = ((size_t(b) * H + h) * T_ + t) * Dh + d;
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

void cuda_rope_table(float* cos_table, float* sin_table, int T_, int Dh, cudaStream_t stream) {
  MPIASR_CHECK(Dh % 2 == 0, "rotary embedding needs an even head size, got " << Dh);
  const size_t n = size_t(T_) * (Dh / 2);
  if (n == 0) return;
  MPIASR_LAUNCH(rope_table_kernel, grid_for(n), kThreads, 0, stream, cos_table, sin_table, T_, Dh);
}

template <typename T>
void cuda_qkv_split_rope_forward(T* q, T* k, T* v, const T* qkv, const float* cos_table,
                                 const float* sin_table, int B, int T_, int H, int Dh,
                                 cudaStream_t stream) {
  MPIASR_CHECK(Dh % 2 == 0, "rotary embedding needs an even head size, got " << Dh);
  const size_t n = size_t(B) * T_ * H * (Dh / 2);
  if (n == 0) return;
  MPIASR_LAUNCH(qkv_split_rope_forward_kernel<T>, grid_for(n), kThreads, 0, stream, q, k, v, qkv,
                cos_table, sin_table, B, T_, H, Dh);
}

template <typename T>
void cuda_qkv_split_rope_backward(T* dqkv, const T* dq, const T* dk, const T* dv,
                                  const float* cos_table, const float* sin_table, int B, int T_,
                                  int H, int Dh, cudaStream_t stream) {
  MPIASR_CHECK(Dh % 2 == 0, "rotary embedding needs an even head size, got " << Dh);
  const size_t n = size_t(B) * T_ * H * (Dh / 2);
  if (n == 0) return;
  MPIASR_LAUNCH(qkv_split_rope_backward_kernel<T>, grid_for(n), kThreads, 0, stream, dqkv, dq, dk,
                dv, cos_table, sin_table, B, T_, H, Dh);
}

template <typename T>
void cuda_masked_softmax_forward(T* probs, const T* scores, const int32_t* lengths, int B, int H,
                                 int T_, cudaStream_t stream) {
  const size_t rows = size_t(B) * H * T_;
  if (rows == 0) return;
  const unsigned blocks = unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  MPIASR_LAUNCH(masked_softmax_forward_kernel<T>, blocks, kThreads, 0, stream, probs, scores,
                lengths, B, H, T_);
}

template <typename T>
void cuda_masked_softmax_backward(T* dscores, const T* dprobs, const T* probs, int B, int H, int T_,
                                  cudaStream_t stream) {
  const size_t rows = size_t(B) * H * T_;
  if (rows == 0) return;
  const unsigned blocks = unsigned((rows + kRowsPerBlock - 1) / kRowsPerBlock);
  MPIASR_LAUNCH(masked_softmax_backward_kernel<T>, blocks, kThreads, 0, stream, dscores, dprobs,
                probs, rows, T_);
}

template <typename T>
void cuda_merge_heads_forward(T* out, const T* ctx, int B, int T_, int H, int Dh,
                              cudaStream_t stream) {
  const size_t n = size_t(B) * T_ * H * Dh;
  if (n == 0) return;
  MPIASR_LAUNCH(merge_heads_kernel<T>, grid_for(n), kThreads, 0, stream, out, ctx, B, T_, H, Dh,
                false);
}

template <typename T>
void cuda_merge_heads_backward(T* dctx, const T* dout, int B, int T_, int H, int Dh,
                               cudaStream_t stream) {
  const size_t n = size_t(B) * T_ * H * Dh;
  if (n == 0) return;
  MPIASR_LAUNCH(merge_heads_kernel<T>, grid_for(n), kThreads, 0, stream, dctx, dout, B, T_, H, Dh,
                true);
}

#define MPIASR_INSTANTIATE(T)                                                                    \
  template void cuda_qkv_split_rope_forward<T>(T*, T*, T*, const T*, const float*, const float*, \
                                               int, int, int, int, cudaStream_t);                \
  template void cuda_qkv_split_rope_backward<T>(T*, const T*, const T*, const T*, const float*,  \
                                                const float*, int, int, int, int, cudaStream_t); \
  template void cuda_masked_softmax_forward<T>(T*, const T*, const int32_t*, int, int, int,      \
                                               cudaStream_t);                                    \
  template void cuda_masked_softmax_backward<T>(T*, const T*, const T*, int, int, int,           \
                                                cudaStream_t);                                   \
  template void cuda_merge_heads_forward<T>(T*, const T*, int, int, int, int, cudaStream_t);     \
  template void cuda_merge_heads_backward<T>(T*, const T*, int, int, int, int, cudaStream_t);
MPIASR_INSTANTIATE(__half)
MPIASR_INSTANTIATE(__nv_bfloat16)
#undef MPIASR_INSTANTIATE

}  // namespace mpiasr
