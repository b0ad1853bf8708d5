// Deterministic column sums (see column_sums.h).
//   partials    grid (column blocks, chunks): thread n of chunk k sums rows
//               [k R, min(M, (k + 1) R)) of column n in float, R = ceil(M / chunks);
//               neighbouring threads read neighbouring columns (coalesced)
//   finish      one thread per column adds its partials in chunk order
#include <algorithm>

#include "kernels/cuda/column_sums.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.h"

namespace mpiasr {

namespace cuda_kernels {
namespace {

template <typename T>
__global__ void column_partials_kernel(float* partials, const T* x, int64_t M, int N,
                                       int64_t rows_per_chunk) {
  const int n = blockIdx.x * blockDim.x + threadIdx.x;
  const int chunk = blockIdx.y;
  if (n >= N) return;
  const int64_t begin = chunk * rows_per_chunk;
  const int64_t end = begin + rows_per_chunk < M ? begin + rows_per_chunk : M;
  float sum = 0.0f;
  for (int64_t m = begin; m < end; ++m) sum += to_float(x[m * N + n]);
  partials[int64_t(chunk) * N + n] = sum;
}

__global__ void add_partials_kernel(float* out, const float* partials, int chunks, int cols) {
  MPIASR_GRID_STRIDE(j, cols) {
    float sum = 0.0f;
    for (int k = 0; k < chunks; ++k) sum += partials[size_t(k) * cols + j];
    out[j] += sum;
  }
}

}  // namespace
}  // namespace cuda_kernels

using namespace cuda_kernels;

int column_chunks(int64_t M) {
  return int(std::clamp<int64_t>(M / 32, 1, kMaxColumnChunks));
}

template <typename T>
void cuda_add_column_sums(float* sums, const T* x, int64_t M, int N, float* partials,
                          cudaStream_t stream) {
  if (M <= 0 || N <= 0) return;
  const int chunks = column_chunks(M);
  const int64_t rows_per_chunk = (M + chunks - 1) / chunks;
  const dim3 grid(unsigned((N + kThreads - 1) / kThreads), unsigned(chunks));
  MPIASR_LAUNCH(column_partials_kernel<T>, grid, kThreads, 0, stream, partials, x, M, N,
                rows_per_chunk);
  cuda_add_partials(sums, partials, chunks, N, stream);
}

void cuda_add_partials(float* out, const float* partials, int chunks, int cols,
                       cudaStream_t stream) {
  if (cols <= 0) return;
  MPIASR_LAUNCH(add_partials_kernel, grid_for(size_t(cols)), kThreads, 0, stream, out, partials,
                chunks, cols);
}

#define MPIASR_INSTANTIATE(T) \
  template void cuda_add_column_sums<T>(float*, const T*, int64_t, int, float*, cudaStream_t);
MPIASR_INSTANTIATE(__half)
MPIASR_INSTANTIATE(__nv_bfloat16)
#undef MPIASR_INSTANTIATE

}  // namespace mpiasr
