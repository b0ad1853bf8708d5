// Launchers of the attention kernels (kernels/cuda/attention.cu): the RoPE
// tables and the fused attention of kernels/backend.h (attention_forward /
// attention_backward) on tensor cores, flash-style: per (b, h) and tile of 64
// queries (32 for heads over 64), the keys < lengths[b] in steps of 32 with an
// online softmax; nothing of size T x T is stored. Layouts as in
// kernels/backend.h: qkv and dqkv [B, T, 3, H, Dh], out and dout [B, T, H, Dh],
// lse [B, H, T] float; lengths [B] on the device; T = __half or
// __nv_bfloat16; Dh even, at most 128.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

namespace mpiasr {

// cos_table, sin_table [T_, Dh / 2] = cos, sin of rope_angle(t, i, Dh)
// (kernels/rope.h), computed in double and rounded to float.
void cuda_rope_table(float* cos_table, float* sin_table, int T_, int Dh, cudaStream_t stream);

// The tables are cuda_rope_table's for at least T_ positions and this Dh.
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
