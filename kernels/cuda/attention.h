// Launchers of the attention kernels (kernels/cuda/attention.cu): the head
// split with rotary embedding, the key-masked softmax and the head merge.
// Layouts as in kernels/backend.h: qkv [B, T, 3, H, Dh], q / k / v and
// contexts [B, H, T, Dh], scores [B, H, T, T]; lengths [B] on the device.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

namespace mpiasr {

// cos_table, sin_table [T, Dh / 2] = cos, sin of rope_angle(t, i, Dh)
// (kernels/rope.h), computed in double and rounded to float.
void cuda_rope_table(float* cos_table, float* sin_table, int T, int Dh, cudaStream_t stream);

// Tables built by cuda_rope_table for at least T positions and this Dh.
void cuda_qkv_split_rope_forward(__half* q, __half* k, __half* v, const __half* qkv,
                                 const float* cos_table, const float* sin_table, int B, int T,
                                 int H, int Dh, cudaStream_t stream);
void cuda_qkv_split_rope_backward(__half* dqkv, const __half* dq, const __half* dk,
                                  const __half* dv, const float* cos_table, const float* sin_table,
                                  int B, int T, int H, int Dh, cudaStream_t stream);

void cuda_masked_softmax_forward(__half* probs, const __half* scores, const int32_t* lengths, int B,
                                 int H, int T, cudaStream_t stream);
void cuda_masked_softmax_backward(__half* dscores, const __half* dprobs, const __half* probs, int B,
                                  int H, int T, cudaStream_t stream);

void cuda_merge_heads_forward(__half* out, const __half* ctx, int B, int T, int H, int Dh,
                              cudaStream_t stream);
void cuda_merge_heads_backward(__half* dctx, const __half* dout, int B, int T, int H, int Dh,
                               cudaStream_t stream);

}  // namespace mpiasr
