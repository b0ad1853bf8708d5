// Launchers of the column-sum kernels (kernels/cuda/column_sums.cu) over T =
// __half or __nv_bfloat16, used for bias gradients that no GEMM epilogue sums:
// dbias[n] += sum_m dout[m, n].
//
// Column sums are deterministic: the M rows are cut into `chunks` contiguous
// ranges, each range summed in float into partials [chunks, N], and the
// partials added in chunk order into the fp32 result.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mpiasr {

constexpr int kMaxColumnChunks = 64;

// The number of row chunks the column sums of M rows use (1 .. kMaxColumnChunks).
int column_chunks(int64_t M);

// sums [N] += sum over m of x [M, N]; partials holds column_chunks(M) * N floats.
template <typename T>
void cuda_add_column_sums(float* sums, const T* x, int64_t M, int N, float* partials,
                          cudaStream_t stream);

// out [cols] += sum over k < chunks of partials [chunks, cols], in chunk order.
void cuda_add_partials(float* out, const float* partials, int chunks, int cols,
                       cudaStream_t stream);

}  // namespace mpiasr
