// Multi-head self-attention on the CPU (kernels/backend.h, attention_forward
// and attention_backward). From qkv [B, T, 3, H, Dh], per utterance b and
// head h, with q, k rotated by RoPE (kernels/rope.h, position = frame t) and
// L = lengths[b] valid keys:
//   S[t, s] = scale q_t . k_s  (s < L)     P = softmax over s of S
//   out[b, t, h, :] = sum_s P[t, s] v_s    lse[b, h, t] = log sum_s exp(S[t, s])
// (lse = -inf and out = 0 when L = 0; rows of padded queries t >= L are
// computed as well). Backward recomputes P from lse:
//   D_t = dout_t . out_t      dv_s = sum_t P[t, s] dout_t
//   dS = P (dout v^T - D)     dq_t = scale sum_s dS[t, s] k_s
//   dk_s = scale sum_t dS[t, s] q_t
// and writes dqkv (overwritten) with dq, dk rotated back; dk = dv = 0 for
// keys s >= L. One (b, h) at a time per thread on BLAS (blas_gemm), its
// scores in a buffer of its own, transposed (L x T, a column per query, so
// that softmax runs down the columns 16 queries at a time): memory O(T L)
// per thread, none kept between the passes.
#pragma once

#include <cstdint>

namespace mpiasr {

template <typename T>
void cpu_attention_forward(T* out, T* lse, const T* qkv, const int32_t* lengths, int B, int T_,
                           int H, int Dh, T scale);
template <typename T>
void cpu_attention_backward(T* dqkv, const T* dout, const T* out, const T* lse, const T* qkv,
                            const int32_t* lengths, int B, int T_, int H, int Dh, T scale);

}  // namespace mpiasr
