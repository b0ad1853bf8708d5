// The reference for the conv2d tests: the 3x3 stride-2 convolution of
// kernels/cpu/conv2d.h as a naive seven-loop sum in double.
#pragma once

#include <vector>

#include "kernels/cpu/conv2d.h"

namespace mpiasr::testing {

struct ConvCase {
  int B, Cin, H, W, Cout;
};

inline size_t out_size(const ConvCase& c) {
  return size_t(c.B) * conv2d_out_size(c.H) * conv2d_out_size(c.W) * c.Cout;
}

// out[b, i, j, co] = bias[co] + sum_{ci, kh, kw} w[co, ci, kh, kw] inp[b, 2i + kh, 2j + kw, ci]
inline std::vector<double> naive_conv2d(const std::vector<double>& inp,
                                        const std::vector<double>& w,
                                        const std::vector<double>& bias, const ConvCase& c) {
  const int Ho = conv2d_out_size(c.H), Wo = conv2d_out_size(c.W);
  std::vector<double> out(out_size(c));
  for (int b = 0; b < c.B; ++b)
    for (int i = 0; i < Ho; ++i)
      for (int j = 0; j < Wo; ++j)
        for (int co = 0; co < c.Cout; ++co) {
          double sum = bias[co];
          for (int ci = 0; ci < c.Cin; ++ci)
            for (int kh = 0; kh < 3; ++kh)
              for (int kw = 0; kw < 3; ++kw)
                sum += w[((size_t(co) * c.Cin + ci) * 3 + kh) * 3 + kw] *
                       inp[((size_t(b) * c.H + 2 * i + kh) * c.W + 2 * j + kw) * c.Cin + ci];
          out[((size_t(b) * Ho + i) * Wo + j) * c.Cout + co] = sum;
        }
  return out;
}

}  // namespace mpiasr::testing
