// Layer normalization over the last dimension on the CPU:
//   mean[n] = 1/C sum_c x[n, c]     rstd[n] = 1 / sqrt(1/C sum_c (x[n, c] - mean[n])^2 + eps)
//   xhat = (x - mean) rstd          out[n, c] = xhat[n, c] w[c] + b[c]
// x, out [N, C]; w, b [C]; mean, rstd [N] saved for the backward pass.
// Backward (g = dout * w):
//   dinp[n, c] (+)= rstd (g - mean_c(g) - xhat mean_c(g xhat))   (accumulated or written)
//   dw[c] += sum_n dout xhat        db[c] += sum_n dout            (accumulated)
// Rows are split over the OpenMP team. Backward takes dw and db in the same
// pass as dinp: rows in chunks of 32, each chunk's sums in row order, added
// to dw and db in chunk order, so every result is independent of the thread
// count. dinp may alias dout when it is written (not accumulated).
#pragma once

namespace mpiasr {

template <typename T>
void cpu_layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias,
                           int N, int C, float eps);

template <typename T>
void cpu_layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                            const T* weight, const T* mean, const T* rstd, int N, int C,
                            bool accumulate);

}  // namespace mpiasr
