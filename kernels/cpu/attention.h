// Attention pieces on the CPU (the score and context GEMMs go through cpu_gemm):
//
// qkv_split_rope: qkv [B, T, 3, H, Dh] (the fused projection) -> q, k, v [B, H, T, Dh],
//   with rotary position embedding on q and k (kernels/rope.h, position = frame t).
//   Backward: dqkv = inverse rotation of dq, dk, and dv copied back (overwritten).
//
// masked_softmax: scores, probs [B, H, T, T]; for query t, key s:
//   probs[s] = exp(x[s] - max) / sum_{s' < L} exp(x[s'] - max) for s < L = lengths[b],
//   probs[s] = 0 exactly for s >= L (rows of padded queries are computed the same way).
//   Backward: dscores[s] = probs[s] (dprobs[s] - sum_s' probs[s'] dprobs[s'])  (overwritten).
//
// merge_heads: ctx [B, H, T, Dh] -> out [B, T, H, Dh] = [B, T, C]; backward the reverse.
//
// attention (fused): from qkv [B, T, 3, H, Dh], per utterance b and head h,
// with q, k rotated (RoPE at frame t) and L = lengths[b] valid keys:
//   S[t, s] = scale q_t . k_s  (s < L)     P = softmax over s of S
//   out[b, t, h, :] = sum_s P[t, s] v_s    lse[b, h, t] = log sum_s exp(S[t, s])
// (lse = -inf and out = 0 when L = 0). Backward recomputes P from lse:
//   D_t = dout_t . out_t      dv_s = sum_t P[t, s] dout_t
//   dS = P (dout v^T - D)     dq_t = scale sum_s dS[t, s] k_s
//   dk_s = scale sum_t dS[t, s] q_t
// and writes dqkv (overwritten) with dq, dk rotated back; dk = dv = 0 for
// keys s >= L. One (b, h) at a time per thread, its T x L scores in a
// buffer of its own: memory O(T L) per thread, none kept between the passes.
#pragma once

#include <cstdint>

namespace mpiasr {

template <typename T>
void cpu_qkv_split_rope_forward(T* q, T* k, T* v, const T* qkv, int B, int T_, int H, int Dh);
template <typename T>
void cpu_qkv_split_rope_backward(T* dqkv, const T* dq, const T* dk, const T* dv, int B, int T_,
                                 int H, int Dh);

template <typename T>
void cpu_masked_softmax_forward(T* probs, const T* scores, const int32_t* lengths, int B, int H,
                                int T_);
template <typename T>
void cpu_masked_softmax_backward(T* dscores, const T* dprobs, const T* probs, int B, int H, int T_);

template <typename T>
void cpu_attention_forward(T* out, T* lse, const T* qkv, const int32_t* lengths, int B, int T_,
                           int H, int Dh, T scale);
template <typename T>
void cpu_attention_backward(T* dqkv, const T* dout, const T* out, const T* lse, const T* qkv,
                            const int32_t* lengths, int B, int T_, int H, int Dh, T scale);

template <typename T>
void cpu_merge_heads_forward(T* out, const T* ctx, int B, int T_, int H, int Dh);
template <typename T>
void cpu_merge_heads_backward(T* dctx, const T* dout, int B, int T_, int H, int Dh);

}  // namespace mpiasr
