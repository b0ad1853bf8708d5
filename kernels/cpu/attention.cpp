// Multi-head self-attention on BLAS, one (utterance, head) per thread (see attention.h).
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/parallel.h"
#include "kernels/exp.h"
#include "kernels/rope.h"
#include "src/base/error.h"

namespace mpiasr {

namespace {

// cos and sin of every (position, pair) angle: tables [T, Dh / 2].
template <typename T>
struct RopeTable {
  std::vector<T> cos, sin;
  RopeTable(int frames, int head_dim) {
    MPIASR_CHECK(head_dim % 2 == 0, "rotary embedding needs an even head size, got " << head_dim);
    const int half = head_dim / 2;
    cos.resize(size_t(frames) * half);
    sin.resize(size_t(frames) * half);
    for (int t = 0; t < frames; ++t) {
      for (int i = 0; i < half; ++i) {
        const double angle = rope_angle(t, i, head_dim);
        cos[size_t(t) * half + i] = T(std::cos(angle));
        sin[size_t(t) * half + i] = T(std::sin(angle));
      }
    }
  }
};

// y = rotation of x by the angles of position t; sign = -1 rotates backwards.
template <typename T>
void rotate(T* y, const T* x, const RopeTable<T>& table, int t, int Dh, T sign) {
  const int half = Dh / 2;
  const T* c = table.cos.data() + size_t(t) * half;
  const T* s = table.sin.data() + size_t(t) * half;
  for (int i = 0; i < half; ++i)
    rope_rotate(x[i], x[i + half], c[i], sign * s[i], &y[i], &y[i + half]);
}

// The head vectors of one (b, h) from qkv [B, T, 3, H, Dh]: part 0 (q), 1 (k)
// or 2 (v) of frames [0, frames) into x [frames, Dh], rotated by RoPE for q and k.
template <typename T>
void gather_head(T* x, const T* qkv, const RopeTable<T>& table, int b, int h, int part, int frames,
                 int T_, int H, int Dh) {
  for (int t = 0; t < frames; ++t) {
    const T* row = qkv + ((int64_t(b) * T_ + t) * 3 + part) * H * Dh + int64_t(h) * Dh;
    if (part == 2) {
      std::memcpy(x + int64_t(t) * Dh, row, sizeof(T) * Dh);
    } else {
      rotate(x + int64_t(t) * Dh, row, table, t, Dh, T(1));
    }
  }
}

// The inverse of gather_head for gradients: dx [frames, Dh] into part `part`
// of dqkv, rotated back for q and k; frames [frames, T) of the part get zeros.
template <typename T>
void scatter_head(T* dqkv, const T* dx, const RopeTable<T>& table, int b, int h, int part,
                  int frames, int T_, int H, int Dh) {
  for (int t = 0; t < T_; ++t) {
    T* row = dqkv + ((int64_t(b) * T_ + t) * 3 + part) * H * Dh + int64_t(h) * Dh;
    if (t >= frames) {
      std::fill(row, row + Dh, T(0));
    } else if (part == 2) {
      std::memcpy(row, dx + int64_t(t) * Dh, sizeof(T) * Dh);
    } else {
      rotate(row, dx + int64_t(t) * Dh, table, t, Dh, T(-1));
    }
  }
}

// x [T, Dh] from the rows of head h of y [B, T, H, Dh].
template <typename T>
void gather_rows(T* x, const T* y, int b, int h, int T_, int H, int Dh) {
  for (int t = 0; t < T_; ++t) {
    std::memcpy(x + int64_t(t) * Dh, y + ((int64_t(b) * T_ + t) * H + h) * Dh, sizeof(T) * Dh);
  }
}

// The scores are kept transposed, S^T [L, ld]: a row per key, a column per
// query, the T queries padded with zeros to ld = padded_length(T) columns.
// Softmax down a column is then a vector loop along the rows for 16 queries
// at once, with no reduction across a vector and no scalar tail (a row-wise
// softmax of L = 99 keys spent as long in its reductions as in its
// exponentials).
constexpr int kQueryAlign = 16;

int padded_length(int T_) {
  return (T_ + kQueryAlign - 1) / kQueryAlign * kQueryAlign;
}

// Zeros in the padding columns [T, ld) of the L rows of st.
template <typename T>
void zero_padding_columns(T* st, int L, int T_, int ld) {
  for (int s = 0; s < L; ++s) std::fill(st + int64_t(s) * ld + T_, st + int64_t(s + 1) * ld, T(0));
}

void check_lengths(const int32_t* lengths, int B, int T_) {
  for (int b = 0; b < B; ++b) {
    MPIASR_CHECK(lengths[b] >= 0 && lengths[b] <= T_, "length " << lengths[b] << " of utterance "
                                                                << b << " is outside [0, " << T_
                                                                << "]");
  }
}

}  // namespace
}  // namespace mpiasr

#define MPIASR_SIMD_SOURCE "kernels/cpu/attention_simd.h"
#include "kernels/cpu/simd_levels.h"

namespace mpiasr {

template <typename T>
void cpu_attention_forward(T* out, T* lse, const T* qkv, const int32_t* lengths, int B, int T_,
                           int H, int Dh, T scale) {
  MPIASR_SIMD_CALL(cpu_attention_forward, out, lse, qkv, lengths, B, T_, H, Dh, scale);
}

template <typename T>
void cpu_attention_backward(T* dqkv, const T* dout, const T* out, const T* lse, const T* qkv,
                            const int32_t* lengths, int B, int T_, int H, int Dh, T scale) {
  MPIASR_SIMD_CALL(cpu_attention_backward, dqkv, dout, out, lse, qkv, lengths, B, T_, H, Dh, scale);
}

#define MPIASR_INSTANTIATE(T)                                                                      \
  template void cpu_attention_forward<T>(T*, T*, const T*, const int32_t*, int, int, int, int, T); \
  template void cpu_attention_backward<T>(T*, const T*, const T*, const T*, const T*,              \
                                          const int32_t*, int, int, int, int, T);
MPIASR_INSTANTIATE(float)
MPIASR_INSTANTIATE(double)
#undef MPIASR_INSTANTIATE

}  // namespace mpiasr
