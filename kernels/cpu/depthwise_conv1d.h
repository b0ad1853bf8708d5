// Depthwise Conv1d over time with "same" padding, masked at padding, on the CPU:
//   out[b, t, c] = bias[c] + sum_k W[c, k] x[b, t + k - P, c]   for t < L_b, P = (K - 1) / 2
//   out[b, t, c] = 0                                            for t >= L_b
// where x[b, s, c] = inp[b, s, c] for 0 <= s < L_b and 0 otherwise (frames past
// the length are treated as zeros, whatever they hold). inp, out [B, T, C];
// W [C, K] (K odd); bias [C]; lengths [B] (host).
// Backward, consistent with that masking:
//   dinp[b, s, c] = sum_k W[c, k] dout[b, s - k + P, c] over s - k + P < L_b, for s < L_b
//   dinp[b, s, c] = 0                                                        for s >= L_b
//   dW[c, k] += sum_{b, t < L_b} dout[b, t, c] x[b, t + k - P, c]
//   dbias[c] += sum_{b, t < L_b} dout[b, t, c]
// dinp is overwritten, dW and dbias are accumulated; null skips.
//
// Each utterance's input (and, for dinp, output gradient) is first copied
// between P zero frames on either side, so that every tap of every valid
// frame reads a row. The weight is transposed to [K, C], channels contiguous.
// The sums then go a vector of channels at a time with the sums of 8 frames
// (out, dinp) or 8 taps (dW) in registers over the taps (or frames): one
// load of the weight (or gradient) and 8 of the input per 8 multiply-adds.
// Frames are split over the OpenMP team for out and dinp, channels for dW and
// dbias (so their sums do not depend on the thread count).
#pragma once

#include <cstdint>

namespace mpiasr {

template <typename T>
void cpu_depthwise_conv1d_forward(T* out, const T* inp, const T* weight, const T* bias,
                                  const int32_t* lengths, int B, int T_, int C, int K);

template <typename T>
void cpu_depthwise_conv1d_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                                   const T* weight, const int32_t* lengths, int B, int T_, int C,
                                   int K);

}  // namespace mpiasr
