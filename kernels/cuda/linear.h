// Fully connected layer on the GPU, PyTorch's layout, the math of
// kernels/cpu/linear.h in mixed precision (kernels/cuda/linear.cpp), T =
// __half or __nv_bfloat16:
//   out[m, n] = sum_k inp[m, k] W[n, k] + bias[n]      inp [M, K], W [N, K], out [M, N] (T)
// backward:
//   dinp[m, k]  = sum_n dout[m, n] W[n, k]             (T, overwritten)
//   dW[n, k]   += sum_m dout[m, n] inp[m, k]           (fp32, accumulated)
//   dbias[n]   += sum_m dout[m, n]                     (fp32, accumulated)
// Null dinp, dW or dbias skip that gradient; a null bias means none. The bias
// is added in the forward GEMM's epilogue; its gradient is summed in the dW
// GEMM's epilogue into scratch and added to dbias (column_sums.h sums it
// when dW is not asked for; gemm.h says what runs where cuBLASLt has no
// algorithm for an epilogue).
#pragma once

#include "kernels/cuda/gemm.h"

namespace mpiasr {

template <typename T>
void cuda_linear_forward(const GemmContext& gemm, T* out, const T* inp, const T* weight,
                         const T* bias, int M, int K, int N);

// partials: column_chunks(M) * N floats of scratch when dbias is not null.
template <typename T>
void cuda_linear_backward(const GemmContext& gemm, T* dinp, float* dweight, float* dbias,
                          const T* dout, const T* inp, const T* weight, int M, int K, int N,
                          float* partials);

}  // namespace mpiasr
