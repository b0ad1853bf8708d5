// Depthwise Conv1d with the weight transposed to [K, C] so the channel loop is
// contiguous (see depthwise_conv1d.h).
#include "kernels/cpu/depthwise_conv1d.h"

#include <algorithm>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "src/base/error.h"

namespace mpiasr {

namespace {

void check_shape(const int32_t* lengths, int B, int T_, int K) {
  MPIASR_CHECK(K > 0 && K % 2 == 1, "depthwise conv1d needs an odd kernel size, got " << K);
  for (int b = 0; b < B; ++b) {
    MPIASR_CHECK(lengths[b] >= 0 && lengths[b] <= T_, "length " << lengths[b] << " of utterance "
                                                                << b << " is outside [0, " << T_
                                                                << "]");
  }
}

// wt[k, c] = W[c, k], or W[c, K - 1 - k] with reversed (the taps of the input gradient).
template <typename T>
std::vector<T> transpose_weight(const T* weight, int C, int K, bool reversed) {
  std::vector<T> wt(size_t(K) * C);
  for (int c = 0; c < C; ++c)
    for (int k = 0; k < K; ++k)
      wt[size_t(reversed ? K - 1 - k : k) * C + c] = weight[size_t(c) * K + k];
  return wt;
}

// Each utterance's frames [0, L_b) between pad zero frames on either side:
// xp [B, T + 2 pad, C], xp[b, s + pad] = x[b, s] for s < L_b, and 0 from L_b
// on. With it every tap of every valid frame reads a row.
template <typename T>
std::unique_ptr<T[]> zero_padded(const T* x, const int32_t* lengths, int B, int T_, int C,
                                 int pad) {
  const int64_t padded_frames = T_ + 2 * pad;
  std::unique_ptr<T[]> xp(new T[size_t(B * padded_frames * C)]);
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(B) * T_ * C))
  for (int b = 0; b < B; ++b) {
    T* utterance = xp.get() + b * padded_frames * C;
    const int64_t frames = lengths[b];
    std::fill_n(utterance, int64_t(pad) * C, T(0));
    std::copy_n(x + int64_t(b) * T_ * C, frames * C, utterance + int64_t(pad) * C);
    std::fill(utterance + (pad + frames) * C, utterance + padded_frames * C, T(0));
  }
  return xp;
}

// Rows whose outputs (or taps) a register block computes together.
constexpr int kBlockRows = 8;

// f(std::integral_constant<int, R>(), first) for blocks [first, first + R)
// that cover [0, n): R = kBlockRows while that fits, then 4, 2 and 1 (a block
// of R rows keeps R sums in flight, so single rows would wait on each sum).
template <typename F>
void for_row_blocks(int n, F&& f) {
  int i = 0;
  for (; i + kBlockRows <= n; i += kBlockRows) f(std::integral_constant<int, kBlockRows>(), i);
  if (i + 4 <= n) f(std::integral_constant<int, 4>(), std::exchange(i, i + 4));
  if (i + 2 <= n) f(std::integral_constant<int, 2>(), std::exchange(i, i + 2));
  if (i < n) f(std::integral_constant<int, 1>(), i);
}

}  // namespace
}  // namespace mpiasr

#define MPIASR_SIMD_SOURCE "kernels/cpu/depthwise_conv1d_simd.h"
#include "kernels/cpu/simd_levels.h"

namespace mpiasr {
namespace {

// out [B, T, C]: rows t < L_b = shifted_products of the taps over xp (zero_padded) from init [C],
// in blocks of kBlockRows rows; rows t >= L_b = 0.
template <typename T>
void correlate(T* out, const T* xp, const T* wt, const T* init, const int32_t* lengths, int B,
               int T_, int C, int K) {
  const int64_t padded_frames = T_ + K - 1;
  const int blocks = (T_ + kBlockRows - 1) / kBlockRows;
#pragma omp parallel for schedule(static) collapse(2) if (parallel_worth(int64_t(B) * T_ * C * K))
  for (int b = 0; b < B; ++b) {
    for (int block = 0; block < blocks; ++block) {
      const int t0 = block * kBlockRows, rows = std::min(kBlockRows, T_ - t0);
      const int valid = std::clamp(lengths[b] - t0, 0, rows);
      T* y = out + (int64_t(b) * T_ + t0) * C;
      const T* x = xp + (b * padded_frames + t0) * C;
      for_row_blocks(valid, [&](auto block_rows, int r) {
        MPIASR_SIMD_CALL(shifted_products, block_rows, y + int64_t(r) * C, wt, x + int64_t(r) * C,
                         init, K, C, 0, C);
      });
      std::fill(y + int64_t(valid) * C, y + int64_t(rows) * C, T(0));
    }
  }
}

}  // namespace

template <typename T>
void cpu_depthwise_conv1d_forward(T* out, const T* inp, const T* weight, const T* bias,
                                  const int32_t* lengths, int B, int T_, int C, int K) {
  check_shape(lengths, B, T_, K);
  const std::unique_ptr<T[]> xp = zero_padded(inp, lengths, B, T_, C, (K - 1) / 2);
  const std::vector<T> bias_or_zero = bias ? std::vector<T>(bias, bias + C) : std::vector<T>(C);
  correlate(out, xp.get(), transpose_weight(weight, C, K, false).data(), bias_or_zero.data(),
            lengths, B, T_, C, K);
}

template <typename T>
void cpu_depthwise_conv1d_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                                   const T* weight, const int32_t* lengths, int B, int T_, int C,
                                   int K) {
  check_shape(lengths, B, T_, K);
  const int pad = (K - 1) / 2;
  // dinp[s] = sum_k W[K - 1 - k] dout[s + k - P]: the same tap sums with the
  // taps reversed, over the zero-padded output gradient.
  if (dinp) {
    const std::unique_ptr<T[]> dyp = zero_padded(dout, lengths, B, T_, C, pad);
    correlate(dinp, dyp.get(), transpose_weight(weight, C, K, true).data(),
              std::vector<T>(C).data(), lengths, B, T_, C, K);
  }
  if (!dweight && !dbias) return;
  const std::unique_ptr<T[]> xp = zero_padded(inp, lengths, B, T_, C, pad);
  const int64_t padded_frames = T_ + 2 * pad;
#pragma omp parallel if (parallel_worth(int64_t(B) * T_ * C * K))
  {
    const auto [c_begin, c_end] = thread_columns<T>(C);
    std::vector<T> dwt(size_t(K) * C, T(0));  // [K, C], this thread's channels only
    for (int b = 0; b < B; ++b) {
      const int valid = lengths[b];
      const T* dy = dout + int64_t(b) * T_ * C;
      if (dbias) {
        for (int t = 0; t < valid; ++t)
          for (int c = c_begin; c < c_end; ++c) dbias[c] += dy[int64_t(t) * C + c];
      }
      if (!dweight) continue;
      // Tap k of frame t reads xp row t + k of utterance b.
      const T* x = xp.get() + b * padded_frames * C;
      for_row_blocks(K, [&](auto block_taps, int k) {
        MPIASR_SIMD_CALL(shifted_products, block_taps, dwt.data() + int64_t(k) * C, dy,
                         x + int64_t(k) * C, static_cast<const T*>(nullptr), valid, C, c_begin,
                         c_end);
      });
    }
    if (dweight) {
      for (int c = c_begin; c < c_end; ++c)
        for (int k = 0; k < K; ++k) dweight[size_t(c) * K + k] += dwt[size_t(k) * C + c];
    }
  }
}

#define MPIASR_INSTANTIATE(T)                                                                     \
  template void cpu_depthwise_conv1d_forward<T>(T*, const T*, const T*, const T*, const int32_t*, \
                                                int, int, int, int);                              \
  template void cpu_depthwise_conv1d_backward<T>(T*, T*, T*, const T*, const T*, const T*,        \
                                                 const int32_t*, int, int, int, int);
MPIASR_INSTANTIATE(float)
MPIASR_INSTANTIATE(double)
#undef MPIASR_INSTANTIATE

}  // namespace mpiasr
