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

// Score rows are kScoreAlign-padded: a row of L scores is stored in
// padded_length(L) elements, the ones after L set to -inf (exp gives 0), so
// the vector loops over a row have no scalar tail (for L = 99 that tail took
// a fifth of the softmax's samples).
constexpr int kScoreAlign = 16;

int padded_length(int L) {
  return (L + kScoreAlign - 1) / kScoreAlign * kScoreAlign;
}

// x [padded] = exp(x - max) of the scores x [L] in place (0 after L); returns
// their sum and writes their log-sum-exp. The caller divides by the sum.
template <typename T>
MPIASR_SIMD_CLONES T unnormalized_softmax_row(T* x, int L, int padded, T* lse) {
  for (int s = L; s < padded; ++s) x[s] = -std::numeric_limits<T>::infinity();
  T max = -INFINITY;
#pragma omp simd reduction(max : max)
  for (int s = 0; s < padded; ++s) max = max > x[s] ? max : x[s];
  T sum = T(0);
#pragma omp simd reduction(+ : sum)
  for (int s = 0; s < padded; ++s) {
    x[s] = branchless_exp(x[s] - max);
    sum += x[s];
  }
  *lse = max + std::log(sum);
  return sum;
}

// The probabilities exp(x - lse) of the scores x [L] in place (0 after L, up
// to padded).
template <typename T>
MPIASR_SIMD_CLONES void probabilities_row(T* x, int L, int padded, T lse) {
  for (int s = L; s < padded; ++s) x[s] = -std::numeric_limits<T>::infinity();
#pragma omp simd
  for (int s = 0; s < padded; ++s) x[s] = branchless_exp(x[s] - lse);
}

void check_lengths(const int32_t* lengths, int B, int T_) {
  for (int b = 0; b < B; ++b) {
    MPIASR_CHECK(lengths[b] >= 0 && lengths[b] <= T_, "length " << lengths[b] << " of utterance "
                                                                << b << " is outside [0, " << T_
                                                                << "]");
  }
}

}  // namespace

template <typename T>
MPIASR_SIMD_CLONES void cpu_attention_forward(T* out, T* lse, const T* qkv, const int32_t* lengths,
                                              int B, int T_, int H, int Dh, T scale) {
  check_lengths(lengths, B, T_);
  const RopeTable<T> table(T_, Dh);
#pragma omp parallel if (parallel_worth(int64_t(B) * H * T_ * T_ * Dh))
  {
    // The thread's buffers, for any length up to T_ (left uninitialized: every use writes first).
    const size_t head = size_t(T_) * Dh;
    std::unique_ptr<T[]> q(new T[head]), k(new T[head]), v(new T[head]), o(new T[head]);
    std::unique_ptr<T[]> p(new T[size_t(T_) * padded_length(T_)]), sums(new T[size_t(T_)]);
#pragma omp for schedule(dynamic)
    for (int64_t bh = 0; bh < int64_t(B) * H; ++bh) {
      const int b = int(bh / H), h = int(bh % H), L = lengths[b], ld = padded_length(L);
      T* lse_row = lse + bh * T_;
      if (L == 0) {
        for (int t = 0; t < T_; ++t) {
          std::fill_n(out + ((int64_t(b) * T_ + t) * H + h) * Dh, Dh, T(0));
          lse_row[t] = -std::numeric_limits<T>::infinity();
        }
        continue;
      }
      gather_head(q.get(), qkv, table, b, h, 0, T_, T_, H, Dh);
      gather_head(k.get(), qkv, table, b, h, 1, L, T_, H, Dh);
      gather_head(v.get(), qkv, table, b, h, 2, L, T_, H, Dh);
      blas_gemm<T>(false, true, T_, L, Dh, scale, q.get(), Dh, k.get(), Dh, T(0), p.get(), ld);
      for (int t = 0; t < T_; ++t)
        sums[t] = unnormalized_softmax_row(p.get() + int64_t(t) * ld, L, ld, &lse_row[t]);
      // o = exp(S - max) v, then each row divided by its sum: Dh divisions a
      // row instead of L.
      blas_gemm<T>(false, false, T_, Dh, L, T(1), p.get(), ld, v.get(), Dh, T(0), o.get(), Dh);
      for (int t = 0; t < T_; ++t) {
        const T inv = T(1) / sums[t];
        const T* o_row = o.get() + int64_t(t) * Dh;
        T* out_row = out + ((int64_t(b) * T_ + t) * H + h) * Dh;
        for (int d = 0; d < Dh; ++d) out_row[d] = o_row[d] * inv;
      }
    }
  }
}

template <typename T>
MPIASR_SIMD_CLONES void cpu_attention_backward(T* dqkv, const T* dout, const T* out, const T* lse,
                                               const T* qkv, const int32_t* lengths, int B, int T_,
                                               int H, int Dh, T scale) {
  check_lengths(lengths, B, T_);
  const RopeTable<T> table(T_, Dh);
#pragma omp parallel if (parallel_worth(int64_t(B) * H * T_ * T_ * Dh))
  {
    // The thread's buffers, for any length up to T_ (left uninitialized: every use writes first).
    const size_t head = size_t(T_) * Dh, scores = size_t(T_) * padded_length(T_);
    std::unique_ptr<T[]> q(new T[head]), k(new T[head]), v(new T[head]), d_out(new T[head]);
    std::unique_ptr<T[]> dq(new T[head]), dk(new T[head]), dv(new T[head]);
    std::unique_ptr<T[]> p(new T[scores]), ds(new T[scores]), row_dot(new T[size_t(T_)]);
#pragma omp for schedule(dynamic)
    for (int64_t bh = 0; bh < int64_t(B) * H; ++bh) {
      const int b = int(bh / H), h = int(bh % H), L = lengths[b], ld = padded_length(L);
      const T* lse_row = lse + bh * T_;
      if (L == 0) {
        std::fill_n(dq.get(), head, T(0));
      } else {
        gather_head(q.get(), qkv, table, b, h, 0, T_, T_, H, Dh);
        gather_head(k.get(), qkv, table, b, h, 1, L, T_, H, Dh);
        gather_head(v.get(), qkv, table, b, h, 2, L, T_, H, Dh);
        gather_rows(d_out.get(), dout, b, h, T_, H, Dh);
        blas_gemm<T>(false, true, T_, L, Dh, scale, q.get(), Dh, k.get(), Dh, T(0), p.get(), ld);
        for (int t = 0; t < T_; ++t) {
          const T* out_row = out + ((int64_t(b) * T_ + t) * H + h) * Dh;
          T dot = T(0);
          for (int d = 0; d < Dh; ++d) dot += d_out[size_t(t) * Dh + d] * out_row[d];
          row_dot[size_t(t)] = dot;
          probabilities_row(p.get() + size_t(t) * ld, L, ld, lse_row[t]);
        }
        // dv = P^T dout; dP = dout v^T; dS = P (dP - D); dq = scale dS k; dk = scale dS^T q
        blas_gemm<T>(true, false, L, Dh, T_, T(1), p.get(), ld, d_out.get(), Dh, T(0), dv.get(),
                     Dh);
        blas_gemm<T>(false, true, T_, L, Dh, T(1), d_out.get(), Dh, v.get(), Dh, T(0), ds.get(),
                     ld);
        for (int t = 0; t < T_; ++t) {
          for (int s = 0; s < L; ++s) {
            const size_t at = size_t(t) * ld + s;
            ds[at] = p[at] * (ds[at] - row_dot[size_t(t)]);
          }
        }
        blas_gemm<T>(false, false, T_, Dh, L, scale, ds.get(), ld, k.get(), Dh, T(0), dq.get(), Dh);
        blas_gemm<T>(true, false, L, Dh, T_, scale, ds.get(), ld, q.get(), Dh, T(0), dk.get(), Dh);
      }
      scatter_head(dqkv, dq.get(), table, b, h, 0, T_, T_, H, Dh);
      scatter_head(dqkv, dk.get(), table, b, h, 1, L, T_, H, Dh);
      scatter_head(dqkv, dv.get(), table, b, h, 2, L, T_, H, Dh);
    }
  }
}

#define MPIASR_INSTANTIATE(T)                                                                      \
  template void cpu_attention_forward<T>(T*, T*, const T*, const int32_t*, int, int, int, int, T); \
  template void cpu_attention_backward<T>(T*, const T*, const T*, const T*, const T*,              \
                                          const int32_t*, int, int, int, int, T);
MPIASR_INSTANTIATE(float)
MPIASR_INSTANTIATE(double)
#undef MPIASR_INSTANTIATE

}  // namespace mpiasr
