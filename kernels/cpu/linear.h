// Fully connected layer on the CPU, PyTorch's layout:
//   out[m, n] = sum_k inp[m, k] W[n, k] + bias[n]      inp [M, K], W [N, K], out [M, N]
// backward:
//   dinp[m, k]  = sum_n dout[m, n] W[n, k]             (overwritten)
//   dW[n, k]   += sum_m dout[m, n] inp[m, k]           (accumulated)
//   dbias[n]   += sum_m dout[m, n]                     (accumulated)
// Null dinp, dW or dbias skip that gradient; a null bias means none.
#pragma once

#include <cstdint>

namespace mpiasr {

template <typename T>
void cpu_linear_forward(T* out, const T* inp, const T* weight, const T* bias, int M, int K, int N);

template <typename T>
void cpu_linear_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                         const T* weight, int M, int K, int N);

// sums[n] += sum_m x[m, n] over x [M, N] (the bias gradient of any layer whose
// bias is broadcast over rows); columns are split over the OpenMP team.
template <typename T>
void cpu_add_column_sums(T* sums, const T* x, int64_t M, int N);

}  // namespace mpiasr
