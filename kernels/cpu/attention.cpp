// Head split with RoPE, key-masked softmax and head merge (see attention.h).
#include "kernels/cpu/attention.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"
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

}  // namespace

template <typename T>
MPIASR_SIMD_CLONES void cpu_qkv_split_rope_forward(T* q, T* k, T* v, const T* qkv, int B, int T_,
                                                   int H, int Dh) {
  const RopeTable<T> table(T_, Dh);
#pragma omp parallel for schedule(static) \
    collapse(2) if (parallel_worth(int64_t(B) * T_ * 3 * H * Dh))
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T_; ++t) {
      const T* row = qkv + (int64_t(b) * T_ + t) * 3 * H * Dh;
      for (int h = 0; h < H; ++h) {
        const int64_t dst = ((int64_t(b) * H + h) * T_ + t) * Dh;
        rotate(q + dst, row + (0 * H + h) * Dh, table, t, Dh, T(1));
        rotate(k + dst, row + (1 * H + h) * Dh, table, t, Dh, T(1));
        std::memcpy(v + dst, row + (2 * H + h) * Dh, sizeof(T) * Dh);
      }
    }
  }
}

template <typename T>
MPIASR_SIMD_CLONES void cpu_qkv_split_rope_backward(T* dqkv, const T* dq, const T* dk, const T* dv,
                                                    int B, int T_, int H, int Dh) {
  const RopeTable<T> table(T_, Dh);
#pragma omp parallel for schedule(static) \
    collapse(2) if (parallel_worth(int64_t(B) * T_ * 3 * H * Dh))
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T_; ++t) {
      T* row = dqkv + (int64_t(b) * T_ + t) * 3 * H * Dh;
      for (int h = 0; h < H; ++h) {
        const int64_t src = ((int64_t(b) * H + h) * T_ + t) * Dh;
        rotate(row + (0 * H + h) * Dh, dq + src, table, t, Dh, T(-1));
        rotate(row + (1 * H + h) * Dh, dk + src, table, t, Dh, T(-1));
        std::memcpy(row + (2 * H + h) * Dh, dv + src, sizeof(T) * Dh);
      }
    }
  }
}

template <typename T>
MPIASR_SIMD_CLONES void cpu_masked_softmax_forward(T* probs, const T* scores,
                                                   const int32_t* lengths, int B, int H, int T_) {
  for (int b = 0; b < B; ++b) {
    MPIASR_CHECK(lengths[b] >= 0 && lengths[b] <= T_, "length " << lengths[b] << " of utterance "
                                                                << b << " is outside [0, " << T_
                                                                << "]");
  }
#pragma omp parallel for schedule(static) collapse(2) if (parallel_worth(int64_t(B) * H * T_ * T_))
  for (int64_t bh = 0; bh < int64_t(B) * H; ++bh) {
    for (int t = 0; t < T_; ++t) {
      const int valid = lengths[bh / H];
      const T* x = scores + (bh * T_ + t) * T_;
      T* p = probs + (bh * T_ + t) * T_;
      T max = -INFINITY;
#pragma omp simd reduction(max : max)
      for (int s = 0; s < valid; ++s) max = max > x[s] ? max : x[s];
      T sum = T(0);
#pragma omp simd reduction(+ : sum)
      for (int s = 0; s < valid; ++s) {
        p[s] = branchless_exp(x[s] - max);
        sum += p[s];
      }
      const T inv = T(1) / sum;
      for (int s = 0; s < valid; ++s) p[s] *= inv;
      for (int s = valid; s < T_; ++s) p[s] = T(0);
    }
  }
}

template <typename T>
MPIASR_SIMD_CLONES void cpu_masked_softmax_backward(T* dscores, const T* dprobs, const T* probs,
                                                    int B, int H, int T_) {
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(B) * H * T_ * T_))
  for (int64_t row = 0; row < int64_t(B) * H * T_; ++row) {
    const T* p = probs + row * T_;
    const T* dp = dprobs + row * T_;
    T* dx = dscores + row * T_;
    T dot = T(0);
#pragma omp simd reduction(+ : dot)
    for (int s = 0; s < T_; ++s) dot += p[s] * dp[s];
    for (int s = 0; s < T_; ++s) dx[s] = p[s] * (dp[s] - dot);
  }
}

template <typename T>
void cpu_merge_heads_forward(T* out, const T* ctx, int B, int T_, int H, int Dh) {
#pragma omp parallel for schedule(static) collapse(2) if (parallel_worth(int64_t(B) * T_ * H * Dh))
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T_; ++t) {
      for (int h = 0; h < H; ++h) {
        std::memcpy(out + ((int64_t(b) * T_ + t) * H + h) * Dh,
                    ctx + ((int64_t(b) * H + h) * T_ + t) * Dh, sizeof(T) * Dh);
      }
    }
  }
}

template <typename T>
void cpu_merge_heads_backward(T* dctx, const T* dout, int B, int T_, int H, int Dh) {
#pragma omp parallel for schedule(static) collapse(2) if (parallel_worth(int64_t(B) * T_ * H * Dh))
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T_; ++t) {
      for (int h = 0; h < H; ++h) {
        std::memcpy(dctx + ((int64_t(b) * H + h) * T_ + t) * Dh,
                    dout + ((int64_t(b) * T_ + t) * H + h) * Dh, sizeof(T) * Dh);
      }
    }
  }
}

#define MPIASR_INSTANTIATE(T)                                                                   \
  template void cpu_qkv_split_rope_forward<T>(T*, T*, T*, const T*, int, int, int, int);        \
  template void cpu_qkv_split_rope_backward<T>(T*, const T*, const T*, const T*, int, int, int, \
                                               int);                                            \
  template void cpu_masked_softmax_forward<T>(T*, const T*, const int32_t*, int, int, int);     \
  template void cpu_masked_softmax_backward<T>(T*, const T*, const T*, int, int, int);          \
  template void cpu_merge_heads_forward<T>(T*, const T*, int, int, int, int);                   \
  template void cpu_merge_heads_backward<T>(T*, const T*, int, int, int, int);
MPIASR_INSTANTIATE(float)
MPIASR_INSTANTIATE(double)
#undef MPIASR_INSTANTIATE

}  // namespace mpiasr
