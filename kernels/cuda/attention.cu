// Multi-head self-attention, flash-style, on tensor cores (wmma 16x16x16,
// 16-bit inputs, fp32 accumulation); the math of kernels/cpu/attention.h.
//
// Rotary embedding (kernels/rope.h) is applied as q and k are loaded from the
// fused projection qkv [B, T, 3, H, Dh]: the pair (x[i], x[i + Dh/2]) at frame
// t turns by t 10000^(-2i/Dh), with cos and sin from tables [T, Dh/2] built
// once in double, like the CPU's; the gradients turn back (sine negated).
//
// Forward, per block (query tile, b h): Q once, then K and V 32 keys at a
// time up to lengths[b]; per warp (16 query rows) S = Q K^T in float, an
// online softmax in log2 units (running max m and sum l per row, the output
// rescaled by exp2(m_old - m_new)), P rounded to 16 bits, O += P V. At the end
// out = O / l into [B, T, H, Dh] and lse = (m + log2 l) ln 2; nothing of size
// T x T is stored.
//
// Backward, deterministic (no atomics), P recomputed from lse:
//   dq kernel  (query tile): D = rowsum(dout out) (also to global for the
//              next kernel); over the key steps S, dP = dout V^T,
//              dS = P (dP - D), dq += dS K; dq scale rotated back
//   dkv kernel (key tile): over the query steps S^T = K Q^T, dP^T = V dout^T,
//              dv += P^T dout, dk += dS^T Q; keys >= lengths[b] get zeros
// Shared tiles: 16-bit rows skewed by 8 elements, float by 4 (bank spread,
// and wmma's 32-byte tile starts); scores are rewritten as 16-bit
// probabilities in place, after a __syncwarp.
#include <mma.h>

#include <cmath>
#include <type_traits>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/rope.h"
#include "src/base/error.h"

namespace mpiasr {

namespace cuda_kernels {
namespace {

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

// Tiles for a head size padded to DP (a multiple of 16, at most 128): blocks
// of kWarps warps, each warp owning 16 rows (query rows in the forward and dq
// kernels, keys in the dk/dv kernel), stepping over the other side kStep
// columns at a time. Leading dimensions are skewed (+8 halves, +4 floats) so
// the 16 rows of a tile do not share banks; they keep the multiples of 16
// bytes and the 32-byte tile starts that wmma needs.
template <int DP>
struct Tiles {
  static_assert(DP % 16 == 0 && DP <= 128, "padded head size");
  static constexpr int kWarps = DP <= 64 ? 4 : 2;
  static constexpr int kRows = 16 * kWarps;
  static constexpr int kStep = 32;
  static constexpr int kLd = DP + 8;               // 16-bit [rows, DP] tiles
  static constexpr int kLdStep = kStep + 4;        // float [rows, kStep] tiles
  static constexpr int kLdStepHalf = 2 * kLdStep;  // the same rows rewritten as 16-bit
  static constexpr int kLdOut = DP + 4;            // float [rows, DP] tiles
};

namespace wmma = nvcuda::wmma;

template <typename T>
using FragmentA = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;
template <typename T, typename Layout>
using FragmentB = wmma::fragment<wmma::matrix_b, 16, 16, 16, T, Layout>;
using Accumulator = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

constexpr float kLog2e = 1.4426950408889634f, kLn2 = 0.6931471805599453f;

// Rows [first, first + rows) of part `part` (0 q, 1 k, 2 v) of head h of
// utterance b, from qkv [B, T, 3, H, Dh], into tile [rows, ld] with DP columns:
// q and k rotated by RoPE, zeros for rows >= valid and columns >= Dh. All the
// block's threads take part.
template <typename T, int DP>
__device__ void load_head_tile(T* tile, const T* qkv, const float* cos_table,
                               const float* sin_table, int b, int h, int part, int first, int rows,
                               int valid, int T_, int H, int Dh) {
  const int half = Dh / 2;
  for (int i = threadIdx.x; i < rows * DP; i += blockDim.x) {
    const int r = i / DP, d = i % DP, t = first + r;
    float value = 0.0f;
    if (t < valid && d < Dh) {
      const T* x = qkv + ((size_t(b) * T_ + t) * 3 + part) * size_t(H) * Dh + size_t(h) * Dh;
      if (part == 2) {
        value = to_float(x[d]);
      } else {
        const int pair = d < half ? d : d - half;
        const size_t at = size_t(t) * half + pair;
        float y1 = 0.0f, y2 = 0.0f;
        rope_rotate(to_float(x[pair]), to_float(x[pair + half]), cos_table[at], sin_table[at], &y1,
                    &y2);
        value = d < half ? y1 : y2;
      }
    }
    tile[r * Tiles<DP>::kLd + d] = from_float<T>(value);
  }
}

// Rows [first, first + rows) of head h of y [B, T, H, Dh] into tile [rows, ld],
// zeros beyond T and Dh.
template <typename T, int DP>
__device__ void load_rows_tile(T* tile, const T* y, int b, int h, int first, int rows, int T_,
                               int H, int Dh) {
  for (int i = threadIdx.x; i < rows * DP; i += blockDim.x) {
    const int r = i / DP, d = i % DP, t = first + r;
    const bool inside = t < T_ && d < Dh;
    tile[r * Tiles<DP>::kLd + d] =
        inside ? y[((size_t(b) * T_ + t) * H + h) * Dh + d] : from_float<T>(0.0f);
  }
}

// The warp's 16 rows of a float tile [16, DP] (ld kLdOut), scaled, into part
// `part` of dqkv at frames [first, first + 16) below T: q and k rotated back
// (RoPE's inverse), v as is.
template <typename T, int DP>
__device__ void store_head_rows(T* dqkv, const float* rows, float scale, const float* cos_table,
                                const float* sin_table, int b, int h, int part, int first, int T_,
                                int H, int Dh) {
  const int lane = threadIdx.x % kWarp, half = Dh / 2;
  for (int i = lane; i < 16 * Dh; i += kWarp) {
    const int r = i / Dh, d = i % Dh, t = first + r;
    if (t >= T_) continue;
    const float* x = rows + r * Tiles<DP>::kLdOut;
    float value = x[d];
    if (part != 2) {
      const int pair = d < half ? d : d - half;
      const size_t at = size_t(t) * half + pair;
      float y1 = 0.0f, y2 = 0.0f;
      rope_rotate(x[pair], x[pair + half], cos_table[at], -sin_table[at], &y1, &y2);
      value = d < half ? y1 : y2;
    }
    dqkv[((size_t(b) * T_ + t) * 3 + part) * size_t(H) * Dh + size_t(h) * Dh + d] =
        from_float<T>(scale * value);
  }
}

// acc = A (16 x K16*16, row-major at a, ld lda) times B (K16*16 x 16): B is
// read column-major (transposed rows, ld ldb) or row-major.
template <typename T, typename LayoutB, int K16>
__device__ void tile_product(Accumulator& acc, const T* a, int lda, const T* b, int ldb) {
  for (int k = 0; k < K16; ++k) {
    FragmentA<T> fa;
    FragmentB<T, LayoutB> fb;
    wmma::load_matrix_sync(fa, a + 16 * k, lda);
    if constexpr (std::is_same_v<LayoutB, wmma::col_major>) {
      wmma::load_matrix_sync(fb, b + 16 * k, ldb);
    } else {
      wmma::load_matrix_sync(fb, b + size_t(16 * k) * ldb, ldb);
    }
    wmma::mma_sync(acc, fa, fb, acc);
  }
}

// dst (float, row-major, ld ldd) = the 16 x 16 block A B^T of 16 rows of A
// and 16 rows of B, each row DP elements (ld ld): scores from queries and
// keys, or their gradients.
template <typename T, int DP>
__device__ void row_product(float* dst, int ldd, const T* a, const T* b, int ld) {
  Accumulator acc;
  wmma::fill_fragment(acc, 0.0f);
  tile_product<T, wmma::col_major, DP / 16>(acc, a, ld, b, ld);
  wmma::store_matrix_sync(dst, acc, ldd, wmma::mem_row_major);
}

template <typename T, int DP>
struct ForwardShared {
  using Tile = Tiles<DP>;
  alignas(32) T q[Tile::kRows * Tile::kLd];
  alignas(32) T k[Tile::kStep * Tile::kLd];
  alignas(32) T v[Tile::kStep * Tile::kLd];
  alignas(32) float s[Tile::kRows * Tile::kLdStep];  // scores, then probabilities in 16 bits
  alignas(32) float o[Tile::kRows * Tile::kLdOut];   // the unnormalized output
  float row_max[Tile::kRows], row_sum[Tile::kRows], row_scale[Tile::kRows];
};

// Block (query tile x, head pair y = b H + h): the tile's queries against the
// keys < lengths[b], kStep keys at a time, with the online softmax (running
// max m and sum l per row, in log2 units: scale_log2 = scale log2 e).
template <typename T, int DP>
__global__ void attention_forward_kernel(T* out, float* lse, const T* qkv, const float* cos_table,
                                         const float* sin_table, const int32_t* lengths, int T_,
                                         int H, int Dh, float scale_log2) {
  using Tile = Tiles<DP>;
  using Shared = ForwardShared<T, DP>;
  static_assert(sizeof(Shared) <= 48 * 1024, "shared memory");
  MPIASR_SHARED(Shared, sh);
  const int bh = blockIdx.y, b = bh / H, h = bh % H, L = lengths[b];
  const int q0 = blockIdx.x * Tile::kRows;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, r0 = 16 * warp;
  load_head_tile<T, DP>(sh.q, qkv, cos_table, sin_table, b, h, 0, q0, Tile::kRows, T_, T_, H, Dh);
  for (int i = threadIdx.x; i < Tile::kRows * Tile::kLdOut; i += blockDim.x) sh.o[i] = 0.0f;
  for (int i = threadIdx.x; i < Tile::kRows; i += blockDim.x) {
    sh.row_max[i] = -INFINITY;
    sh.row_sum[i] = 0.0f;
  }
  __syncthreads();
  T* p = reinterpret_cast<T*>(sh.s);
  for (int k0 = 0; k0 < L; k0 += Tile::kStep) {
    load_head_tile<T, DP>(sh.k, qkv, cos_table, sin_table, b, h, 1, k0, Tile::kStep, L, T_, H, Dh);
    load_head_tile<T, DP>(sh.v, qkv, cos_table, sin_table, b, h, 2, k0, Tile::kStep, L, T_, H, Dh);
    __syncthreads();
    for (int j = 0; j < Tile::kStep / 16; ++j) {  // S = Q K^T
      row_product<T, DP>(sh.s + r0 * Tile::kLdStep + 16 * j, Tile::kLdStep, sh.q + r0 * Tile::kLd,
                         sh.k + 16 * j * Tile::kLd, Tile::kLd);
    }
    __syncwarp();
    // Online softmax: lanes l and l + 16 share row r, 16 keys each.
    const int r = r0 + lane % 16, c0 = 16 * (lane / 16);
    float x[16];
    float tile_max = -INFINITY;
    for (int c = 0; c < 16; ++c) {
      x[c] = k0 + c0 + c < L ? sh.s[r * Tile::kLdStep + c0 + c] * scale_log2 : -INFINITY;
      tile_max = fmaxf(tile_max, x[c]);
    }
    tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, 16));
    const float old_max = sh.row_max[r], new_max = fmaxf(old_max, tile_max);
    float tile_sum = 0.0f;
    for (int c = 0; c < 16; ++c) {
      x[c] = exp2f(x[c] - new_max);
      tile_sum += x[c];
    }
    tile_sum += __shfl_xor_sync(0xffffffffu, tile_sum, 16);
    __syncwarp();  // every score is read before the probabilities overwrite them
    for (int c = 0; c < 16; ++c) p[r * Tile::kLdStepHalf + c0 + c] = from_float<T>(x[c]);
    if (lane < 16) {
      const float alpha = exp2f(old_max - new_max);
      sh.row_max[r] = new_max;
      sh.row_sum[r] = alpha * sh.row_sum[r] + tile_sum;
      sh.row_scale[r] = alpha;
    }
    __syncwarp();
    for (int i = lane; i < 16 * DP; i += kWarp) {  // O = alpha O + P V
      const int rr = r0 + i / DP;
      sh.o[rr * Tile::kLdOut + i % DP] *= sh.row_scale[rr];
    }
    __syncwarp();
    for (int d = 0; d < DP / 16; ++d) {
      Accumulator acc;
      float* o_tile = sh.o + r0 * Tile::kLdOut + 16 * d;
      wmma::load_matrix_sync(acc, o_tile, Tile::kLdOut, wmma::mem_row_major);
      tile_product<T, wmma::row_major, Tile::kStep / 16>(
          acc, p + r0 * Tile::kLdStepHalf, Tile::kLdStepHalf, sh.v + 16 * d, Tile::kLd);
      wmma::store_matrix_sync(o_tile, acc, Tile::kLdOut, wmma::mem_row_major);
    }
    __syncthreads();  // K and V are reloaded, S rewritten
  }
  __syncwarp();
  for (int i = lane; i < 16 * Dh; i += kWarp) {
    const int rr = r0 + i / Dh, d = i % Dh, t = q0 + rr;
    if (t >= T_) continue;
    const float l = sh.row_sum[rr];
    out[((size_t(b) * T_ + t) * H + h) * Dh + d] =
        from_float<T>(l > 0.0f ? sh.o[rr * Tile::kLdOut + d] / l : 0.0f);
  }
  if (lane < 16 && q0 + r0 + lane < T_) {
    const int rr = r0 + lane;
    const float l = sh.row_sum[rr];
    lse[size_t(bh) * T_ + q0 + rr] = l > 0.0f ? (sh.row_max[rr] + log2f(l)) * kLn2 : -INFINITY;
  }
}

template <typename T, int DP>
struct BackwardQueryShared {
  using Tile = Tiles<DP>;
  union {
    struct {
      alignas(32) T q[Tile::kRows * Tile::kLd];
      alignas(32) T dout[Tile::kRows * Tile::kLd];
    } in;
    alignas(32) float dq[Tile::kRows * Tile::kLdOut];  // at the end, the gradient rows
  };
  alignas(32) T k[Tile::kStep * Tile::kLd];
  alignas(32) T v[Tile::kStep * Tile::kLd];
  alignas(32) float s[Tile::kRows * Tile::kLdStep];   // S, then P
  alignas(32) float dp[Tile::kRows * Tile::kLdStep];  // dP, then dS in 16 bits
  float lse2[Tile::kRows], row_dot[Tile::kRows];
};

// Block (query tile x, head pair y): D = rowsum(dout out) of its queries (to
// row_dot for the dk/dv kernel), then dq = scale dS K over the keys < L.
template <typename T, int DP>
__global__ void attention_backward_dq_kernel(T* dqkv, float* row_dot, const T* dout, const T* out,
                                             const float* lse, const T* qkv, const float* cos_table,
                                             const float* sin_table, const int32_t* lengths, int T_,
                                             int H, int Dh, float scale, float scale_log2) {
  using Tile = Tiles<DP>;
  using Shared = BackwardQueryShared<T, DP>;
  static_assert(sizeof(Shared) <= 48 * 1024, "shared memory");
  MPIASR_SHARED(Shared, sh);
  const int bh = blockIdx.y, b = bh / H, h = bh % H, L = lengths[b];
  const int q0 = blockIdx.x * Tile::kRows;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, r0 = 16 * warp;
  load_head_tile<T, DP>(sh.in.q, qkv, cos_table, sin_table, b, h, 0, q0, Tile::kRows, T_, T_, H,
                        Dh);
  load_rows_tile<T, DP>(sh.in.dout, dout, b, h, q0, Tile::kRows, T_, H, Dh);
  for (int r = threadIdx.x; r < Tile::kRows; r += blockDim.x) {
    const int t = q0 + r;
    float dot = 0.0f, l2 = INFINITY;  // rows past T: P = 0
    if (t < T_) {
      const size_t row = (size_t(b) * T_ + t) * H + h;
      for (int d = 0; d < Dh; ++d)
        dot += to_float(dout[row * Dh + d]) * to_float(out[row * Dh + d]);
      row_dot[size_t(bh) * T_ + t] = dot;
      l2 = lse[size_t(bh) * T_ + t] * kLog2e;
    }
    sh.row_dot[r] = dot;
    sh.lse2[r] = l2;
  }
  Accumulator dq[DP / 16];
  for (Accumulator& acc : dq) wmma::fill_fragment(acc, 0.0f);
  T* ds = reinterpret_cast<T*>(sh.dp);
  __syncthreads();
  for (int k0 = 0; k0 < L; k0 += Tile::kStep) {
    load_head_tile<T, DP>(sh.k, qkv, cos_table, sin_table, b, h, 1, k0, Tile::kStep, L, T_, H, Dh);
    load_head_tile<T, DP>(sh.v, qkv, cos_table, sin_table, b, h, 2, k0, Tile::kStep, L, T_, H, Dh);
    __syncthreads();
    for (int j = 0; j < Tile::kStep / 16; ++j) {  // S = Q K^T, dP = dout V^T
      row_product<T, DP>(sh.s + r0 * Tile::kLdStep + 16 * j, Tile::kLdStep,
                         sh.in.q + r0 * Tile::kLd, sh.k + 16 * j * Tile::kLd, Tile::kLd);
      row_product<T, DP>(sh.dp + r0 * Tile::kLdStep + 16 * j, Tile::kLdStep,
                         sh.in.dout + r0 * Tile::kLd, sh.v + 16 * j * Tile::kLd, Tile::kLd);
    }
    __syncwarp();
    // dS = P (dP - D), P = exp(S scale - lse): lanes l and l + 16 share row r.
    const int r = r0 + lane % 16, c0 = 16 * (lane / 16);
    float g[16];
    for (int c = 0; c < 16; ++c) {
      const int at = r * Tile::kLdStep + c0 + c;
      const float prob = k0 + c0 + c < L ? exp2f(sh.s[at] * scale_log2 - sh.lse2[r]) : 0.0f;
      g[c] = prob * (sh.dp[at] - sh.row_dot[r]);
    }
    __syncwarp();  // every dP is read before dS overwrites it
    for (int c = 0; c < 16; ++c) ds[r * Tile::kLdStepHalf + c0 + c] = from_float<T>(g[c]);
    __syncwarp();
    for (int d = 0; d < DP / 16; ++d) {  // dq += dS K
      tile_product<T, wmma::row_major, Tile::kStep / 16>(
          dq[d], ds + r0 * Tile::kLdStepHalf, Tile::kLdStepHalf, sh.k + 16 * d, Tile::kLd);
    }
    __syncthreads();  // K and V are reloaded
  }
  __syncthreads();  // q and dout give way to the gradient rows
  for (int d = 0; d < DP / 16; ++d) {
    wmma::store_matrix_sync(sh.dq + r0 * Tile::kLdOut + 16 * d, dq[d], Tile::kLdOut,
                            wmma::mem_row_major);
  }
  __syncwarp();
  store_head_rows<T, DP>(dqkv, sh.dq + r0 * Tile::kLdOut, scale, cos_table, sin_table, b, h, 0,
                         q0 + r0, T_, H, Dh);
}

template <typename T, int DP>
struct BackwardKeyShared {
  using Tile = Tiles<DP>;
  union {
    struct {
      alignas(32) T k[Tile::kRows * Tile::kLd];
      alignas(32) T v[Tile::kRows * Tile::kLd];
    } in;
    alignas(32) float rows[Tile::kRows * Tile::kLdOut];  // at the end, dv then dk
  };
  alignas(32) T q[Tile::kStep * Tile::kLd];
  alignas(32) T dout[Tile::kStep * Tile::kLd];
  alignas(32) float s[Tile::kRows * Tile::kLdStep];   // S^T, then P^T in 16 bits
  alignas(32) float dp[Tile::kRows * Tile::kLdStep];  // dP^T, then dS^T in 16 bits
  float lse2[Tile::kStep], row_dot[Tile::kStep];
};

// Block (key tile x, head pair y): dv = P^T dout and dk = scale dS^T Q of its
// keys over every query (row_dot from the dq kernel); keys >= L get zeros.
template <typename T, int DP>
__global__ void attention_backward_dkv_kernel(T* dqkv, const float* row_dot, const T* dout,
                                              const float* lse, const T* qkv,
                                              const float* cos_table, const float* sin_table,
                                              const int32_t* lengths, int T_, int H, int Dh,
                                              float scale, float scale_log2) {
  using Tile = Tiles<DP>;
  using Shared = BackwardKeyShared<T, DP>;
  static_assert(sizeof(Shared) <= 48 * 1024, "shared memory");
  MPIASR_SHARED(Shared, sh);
  const int bh = blockIdx.y, b = bh / H, h = bh % H, L = lengths[b];
  const int k0 = blockIdx.x * Tile::kRows;
  const int warp = threadIdx.x / kWarp, lane = threadIdx.x % kWarp, r0 = 16 * warp;
  Accumulator dk[DP / 16], dv[DP / 16];
  for (int d = 0; d < DP / 16; ++d) {
    wmma::fill_fragment(dk[d], 0.0f);
    wmma::fill_fragment(dv[d], 0.0f);
  }
  T* pt = reinterpret_cast<T*>(sh.s);
  T* dst = reinterpret_cast<T*>(sh.dp);
  if (k0 < L) {
    load_head_tile<T, DP>(sh.in.k, qkv, cos_table, sin_table, b, h, 1, k0, Tile::kRows, L, T_, H,
                          Dh);
    load_head_tile<T, DP>(sh.in.v, qkv, cos_table, sin_table, b, h, 2, k0, Tile::kRows, L, T_, H,
                          Dh);
    for (int q0 = 0; q0 < T_; q0 += Tile::kStep) {
      load_head_tile<T, DP>(sh.q, qkv, cos_table, sin_table, b, h, 0, q0, Tile::kStep, T_, T_, H,
                            Dh);
      load_rows_tile<T, DP>(sh.dout, dout, b, h, q0, Tile::kStep, T_, H, Dh);
      for (int c = threadIdx.x; c < Tile::kStep; c += blockDim.x) {
        const int t = q0 + c;
        sh.lse2[c] = t < T_ ? lse[size_t(bh) * T_ + t] * kLog2e : INFINITY;
        sh.row_dot[c] = t < T_ ? row_dot[size_t(bh) * T_ + t] : 0.0f;
      }
      __syncthreads();
      for (int j = 0; j < Tile::kStep / 16; ++j) {  // S^T = K Q^T, dP^T = V dout^T
        row_product<T, DP>(sh.s + r0 * Tile::kLdStep + 16 * j, Tile::kLdStep,
                           sh.in.k + r0 * Tile::kLd, sh.q + 16 * j * Tile::kLd, Tile::kLd);
        row_product<T, DP>(sh.dp + r0 * Tile::kLdStep + 16 * j, Tile::kLdStep,
                           sh.in.v + r0 * Tile::kLd, sh.dout + 16 * j * Tile::kLd, Tile::kLd);
      }
      __syncwarp();
      // P^T and dS^T: lanes l and l + 16 share key row r, 16 queries each.
      const int r = r0 + lane % 16, c0 = 16 * (lane / 16);
      const bool key_valid = k0 + r < L;
      float prob[16], g[16];
      for (int c = 0; c < 16; ++c) {
        const int at = r * Tile::kLdStep + c0 + c;
        prob[c] = key_valid ? exp2f(sh.s[at] * scale_log2 - sh.lse2[c0 + c]) : 0.0f;
        g[c] = prob[c] * (sh.dp[at] - sh.row_dot[c0 + c]);
      }
      __syncwarp();  // every S^T and dP^T is read before they are overwritten
      for (int c = 0; c < 16; ++c) {
        pt[r * Tile::kLdStepHalf + c0 + c] = from_float<T>(prob[c]);
        dst[r * Tile::kLdStepHalf + c0 + c] = from_float<T>(g[c]);
      }
      __syncwarp();
      for (int d = 0; d < DP / 16; ++d) {  // dv += P^T dout, dk += dS^T Q
        tile_product<T, wmma::row_major, Tile::kStep / 16>(
            dv[d], pt + r0 * Tile::kLdStepHalf, Tile::kLdStepHalf, sh.dout + 16 * d, Tile::kLd);
        tile_product<T, wmma::row_major, Tile::kStep / 16>(
            dk[d], dst + r0 * Tile::kLdStepHalf, Tile::kLdStepHalf, sh.q + 16 * d, Tile::kLd);
      }
      __syncthreads();  // Q and dout are reloaded
    }
  }
  __syncthreads();  // K and V give way to the gradient rows
  float* rows = sh.rows + r0 * Tile::kLdOut;
  for (int d = 0; d < DP / 16; ++d) {
    wmma::store_matrix_sync(rows + 16 * d, dv[d], Tile::kLdOut, wmma::mem_row_major);
  }
  __syncwarp();
  store_head_rows<T, DP>(dqkv, rows, 1.0f, cos_table, sin_table, b, h, 2, k0 + r0, T_, H, Dh);
  __syncwarp();
  for (int d = 0; d < DP / 16; ++d) {
    wmma::store_matrix_sync(rows + 16 * d, dk[d], Tile::kLdOut, wmma::mem_row_major);
  }
  __syncwarp();
  store_head_rows<T, DP>(dqkv, rows, scale, cos_table, sin_table, b, h, 1, k0 + r0, T_, H, Dh);
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

namespace {

// Calls f(std::integral_constant<int, DP>) with the padded head size DP that
// holds Dh (even, at most 128): 16, 32, 48, 64, 96 or 128.
template <typename F>
void with_padded_head_size(int Dh, F f) {
  MPIASR_CHECK(Dh > 0 && Dh % 2 == 0 && Dh <= 128,
               "fused attention takes even head sizes up to 128, got " << Dh);
  if (Dh <= 16) return f(std::integral_constant<int, 16>{});
  if (Dh <= 32) return f(std::integral_constant<int, 32>{});
  if (Dh <= 48) return f(std::integral_constant<int, 48>{});
  if (Dh <= 64) return f(std::integral_constant<int, 64>{});
  if (Dh <= 96) return f(std::integral_constant<int, 96>{});
  return f(std::integral_constant<int, 128>{});
}

}  // namespace

template <typename T>
void cuda_attention_forward(T* out, float* lse, const T* qkv, const float* cos_table,
                            const float* sin_table, const int32_t* lengths, int B, int T_, int H,
                            int Dh, float scale, cudaStream_t stream) {
  with_padded_head_size(Dh, [&](auto padded) {
    constexpr int DP = decltype(padded)::value;
    using Tile = Tiles<DP>;
    if (B * H == 0 || T_ == 0) return;
    const dim3 grid(unsigned((T_ + Tile::kRows - 1) / Tile::kRows), unsigned(B * H));
    constexpr auto forward = attention_forward_kernel<T, DP>;
    MPIASR_LAUNCH(forward, grid, kWarp * Tile::kWarps, 0, stream, out, lse, qkv, cos_table,
                  sin_table, lengths, T_, H, Dh, scale * kLog2e);
  });
}

template <typename T>
void cuda_attention_backward(T* dqkv, float* row_dot, const T* dout, const T* out, const float* lse,
                             const T* qkv, const float* cos_table, const float* sin_table,
                             const int32_t* lengths, int B, int T_, int H, int Dh, float scale,
                             cudaStream_t stream) {
  with_padded_head_size(Dh, [&](auto padded) {
    constexpr int DP = decltype(padded)::value;
    using Tile = Tiles<DP>;
    if (B * H == 0 || T_ == 0) return;
    const dim3 grid(unsigned((T_ + Tile::kRows - 1) / Tile::kRows), unsigned(B * H));
    constexpr auto backward_dq = attention_backward_dq_kernel<T, DP>;
    MPIASR_LAUNCH(backward_dq, grid, kWarp * Tile::kWarps, 0, stream, dqkv, row_dot, dout, out, lse,
                  qkv, cos_table, sin_table, lengths, T_, H, Dh, scale, scale * kLog2e);
    constexpr auto backward_dkv = attention_backward_dkv_kernel<T, DP>;
    MPIASR_LAUNCH(backward_dkv, grid, kWarp * Tile::kWarps, 0, stream, dqkv, row_dot, dout, lse,
                  qkv, cos_table, sin_table, lengths, T_, H, Dh, scale, scale * kLog2e);
  });
}

#define MPIASR_INSTANTIATE(T)                                                                      \
  template void cuda_attention_forward<T>(T*, float*, const T*, const float*, const float*,        \
                                          const int32_t*, int, int, int, int, float,               \
                                          cudaStream_t);                                           \
  template void cuda_attention_backward<T>(T*, float*, const T*, const T*, const float*, const T*, \
                                           const float*, const float*, const int32_t*, int, int,   \
                                           int, int, float, cudaStream_t);
MPIASR_INSTANTIATE(__half)
MPIASR_INSTANTIATE(__nv_bfloat16)
#undef MPIASR_INSTANTIATE

}  // namespace mpiasr
