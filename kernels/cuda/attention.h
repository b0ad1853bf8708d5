// Launchers of the attention kernels (kernels/cuda/attention.cu): the head
// split with rotary embedding, the key-masked softmax and the head merge.
// Layouts as in kernels/backend.h: qkv [B, T, 3, H, Dh], q / k / v and
// contexts [B, H, T, Dh], scores [B, H, T, T]; lengths [B] on the device.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mpiasr {

// cos_table, sin_table [T_, Dh / 2] = cos, sin of rope_angle(t, i, Dh)
// (kernels/rope.h), computed in double and rounded to float.
void cuda_rope_table(float* cos_table, float* sin_table, int T_, int Dh, cudaStream_t stream);

// Tables built by cuda_rope_table for at least T_ positions and this Dh.
template <typename T>
void cuda_qkv_split_rope_forward(T* q, T* k, T* v, const T* qkv, const float* cos_table,
                                 const float* sin_table, int B, int T_, int H, int Dh,
                                 cudaStream_t stream);
template <typename T>
void cuda_qkv_split_rope_backward(T* dqkv, const T* dq, const T* dk, const T* dv,
                                  const float* cos_table, const float* sin_table, int B, int T_,
                                  int H, int Dh, cudaStream_t stream);

template <typename T>
void cuda_masked_softmax_forward(T* probs, const T* scores, const int32_t* lengths, int B, int H,
                                 int T_, cudaStream_t stream);
template <typename T>
void cuda_masked_softmax_backward(T* dscores, const T* dprobs, const T* probs, int B, int H, int T_,
                                  cudaStream_t stream);

template <typename T>
void cuda_merge_heads_forward(T* out, const T* ctx, int B, int T_, int H, int Dh,
                              cudaStream_t stream);
template <typename T>
void cuda_merge_heads_backward(T* dctx, const T* dout, int B, int T_, int H, int Dh,
                               cudaStream_t stream);

// Fused attention (kernels/backend.h, attention_forward / _backward) on
// tensor cores (wmma), flash-style: per (b, h) and tile of 64 queries (32
// for heads over 64), the keys < lengths[b] in steps of 32 with an online
// softmax; nothing of size T x T is stored. lse [B, H, T] float. The tables
// are cuda_rope_table's for at least T positions; Dh even, at most 128.
template <typename T>
void cuda_attention_forward(T* out, float* lse, const T* qkv, const float* cos_table,
                            const float* sin_table, const int32_t* lengths, int B, int T_, int H,
                            int Dh, float scale, cudaStream_t stream);
// row_dot: B H T floats of scratch (D = rowsum(dout out)).
template <typename T>
void cuda_attention_backward(T* dqkv, float* row_dot, const T* dout, const T* out, const float* lse,
                             const T* qkv, const float* cos_table, const float* sin_table,
                             const int32_t* lengths, int B, int T_, int H, int Dh, float scale,
                             cudaStream_t stream);

}  // namespace mpiasr
