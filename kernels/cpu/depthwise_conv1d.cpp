// Depthwise Conv1d with the weight transposed to [K, C] so the channel loop is
// contiguous (see depthwise_conv1d.h).
#include "kernels/cpu/depthwise_conv1d.h"

#include <algorithm>
#include <vector>

#include "kernels/cpu/parallel.h"
#include "kernels/cpu/simd.h"
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

// wt[k, c] = W[c, k]
template <typename T>
std::vector<T> transpose_weight(const T* weight, int C, int K) {
  std::vector<T> wt(size_t(K) * C);
  for (int c = 0; c < C; ++c)
    for (int k = 0; k < K; ++k) wt[size_t(k) * C + c] = weight[size_t(c) * K + k];
  return wt;
}

}  // namespace

template <typename T>
MPIASR_SIMD_CLONES void cpu_depthwise_conv1d_forward(T* out, const T* inp, const T* weight,
                                                     const T* bias, const int32_t* lengths, int B,
                                                     int T_, int C, int K) {
  check_shape(lengths, B, T_, K);
  const std::vector<T> wt = transpose_weight(weight, C, K);
  const int pad = (K - 1) / 2;
#pragma omp parallel for schedule(static) collapse(2) if (parallel_worth(int64_t(B) * T_ * C * K))
  for (int b = 0; b < B; ++b) {
    for (int t = 0; t < T_; ++t) {
      const int valid = lengths[b];
      T* y = out + (int64_t(b) * T_ + t) * C;
      if (t >= valid) {
        std::fill(y, y + C, T(0));
        continue;
      }
      for (int c = 0; c < C; ++c) y[c] = bias ? bias[c] : T(0);
      const int k_begin = std::max(0, pad - t), k_end = std::min(K, valid - t + pad);
      for (int k = k_begin; k < k_end; ++k) {
        const T* x = inp + (int64_t(b) * T_ + t + k - pad) * C;
        const T* w = wt.data() + size_t(k) * C;
        for (int c = 0; c < C; ++c) y[c] += w[c] * x[c];
      }
    }
  }
}

template <typename T>
MPIASR_SIMD_CLONES void cpu_depthwise_conv1d_backward(T* dinp, T* dweight, T* dbias, const T* dout,
                                                      const T* inp, const T* weight,
                                                      const int32_t* lengths, int B, int T_, int C,
                                                      int K) {
  check_shape(lengths, B, T_, K);
  const int pad = (K - 1) / 2;
  if (dinp) {
    const std::vector<T> wt = transpose_weight(weight, C, K);
#pragma omp parallel for schedule(static) collapse(2) if (parallel_worth(int64_t(B) * T_ * C * K))
    for (int b = 0; b < B; ++b) {
      for (int s = 0; s < T_; ++s) {
        const int valid = lengths[b];
        T* dx = dinp + (int64_t(b) * T_ + s) * C;
        std::fill(dx, dx + C, T(0));
        if (s >= valid) continue;
        // Output t = s - k + pad reads input s through tap k.
        const int k_begin = std::max(0, s + pad - valid + 1), k_end = std::min(K, s + pad + 1);
        for (int k = k_begin; k < k_end; ++k) {
          const T* dy = dout + (int64_t(b) * T_ + s - k + pad) * C;
          const T* w = wt.data() + size_t(k) * C;
          for (int c = 0; c < C; ++c) dx[c] += w[c] * dy[c];
        }
      }
    }
  }
  if (!dweight && !dbias) return;
#pragma omp parallel if (parallel_worth(int64_t(B) * T_ * C * K))
  {
    const auto [c_begin, c_end] = thread_columns<T>(C);
    std::vector<T> dwt(size_t(K) * C, T(0));  // [K, C], this thread's channels only
    for (int b = 0; b < B; ++b) {
      const int valid = lengths[b];
      for (int t = 0; t < valid; ++t) {
        const T* dy = dout + (int64_t(b) * T_ + t) * C;
        if (dbias) {
          for (int c = c_begin; c < c_end; ++c) dbias[c] += dy[c];
        }
        if (!dweight) continue;
        const int k_begin = std::max(0, pad - t), k_end = std::min(K, valid - t + pad);
        for (int k = k_begin; k < k_end; ++k) {
          const T* x = inp + (int64_t(b) * T_ + t + k - pad) * C;
          T* dw = dwt.data() + size_t(k) * C;
          for (int c = c_begin; c < c_end; ++c) dw[c] += dy[c] * x[c];
        }
      }
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
