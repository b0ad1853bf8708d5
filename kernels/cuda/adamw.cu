// Optimizer kernels over the flat fp32 buffers:
//   adamw          one thread per element: adamw_update (kernels/adamw_math.h)
//                  on w, m, v in float, then the compute copy w_act = (T) w
//   sum_squares    sum g^2 in double, in two stages with a fixed launch shape
//                  (kReductionBlocks blocks of kThreads grid-striding, block
//                  sums to partials, one block summing them), so the result
//                  does not depend on the device or on timing
//   has_nonfinite  a device flag set by any thread that sees NaN or inf
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.h"

namespace mpiasr {

namespace cuda_kernels {
namespace {

template <typename T>
__global__ void adamw_kernel(float* w, T* w_act, const float* g, float* m, float* v, size_t n,
                             AdamWCoefficients<float> c) {
  MPIASR_GRID_STRIDE(i, n) {
    float wi = w[i], mi = m[i], vi = v[i];
    adamw_update(wi, mi, vi, g[i], c);
    w[i] = wi;
    m[i] = mi;
    v[i] = vi;
    if (w_act) w_act[i] = from_float<T>(wi);
  }
}

__global__ void sum_squares_partials_kernel(double* partials, const float* g, size_t n) {
  MPIASR_SHARED(double[kWarp], reduce);
  double sum = 0.0;
  MPIASR_GRID_STRIDE(i, n) sum += double(g[i]) * double(g[i]);
  sum = block_sum(sum, reduce);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void sum_partials_kernel(double* result, const double* partials, int count) {
  MPIASR_SHARED(double[kWarp], reduce);
  double sum = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = block_sum(sum, reduce);
  if (threadIdx.x == 0) *result = sum;
}

__global__ void has_nonfinite_kernel(int* flag, const float* g, size_t n) {
  bool found = false;
  MPIASR_GRID_STRIDE(i, n) found = found || !isfinite(g[i]);
  if (found) *flag = 1;
}

}  // namespace
}  // namespace cuda_kernels

using namespace cuda_kernels;

template <typename T>
void cuda_adamw_step(float* w, T* w_act, const float* g, float* m, float* v, size_t n,
                     const AdamWCoefficients<float>& coefficients, cudaStream_t stream) {
  if (n == 0) return;
  MPIASR_LAUNCH(adamw_kernel<T>, grid_for(n), kThreads, 0, stream, w, w_act, g, m, v, n,
                coefficients);
}

void cuda_sum_squares(double* result, const float* g, size_t n, double* partials,
                      cudaStream_t stream) {
  MPIASR_LAUNCH(sum_squares_partials_kernel, kReductionBlocks, kThreads, 0, stream, partials, g, n);
  MPIASR_LAUNCH(sum_partials_kernel, 1, kThreads, 0, stream, result, partials, kReductionBlocks);
}

void cuda_has_nonfinite(int* flag, const float* g, size_t n, cudaStream_t stream) {
  CUDA_CHECK(cudaMemsetAsync(flag, 0, sizeof(int), stream));
  if (n == 0) return;
  MPIASR_LAUNCH(has_nonfinite_kernel, grid_for(n), kThreads, 0, stream, flag, g, n);
}

template void cuda_adamw_step<__half>(float*, __half*, const float*, float*, float*, size_t,
                                      const AdamWCoefficients<float>&, cudaStream_t);
template void cuda_adamw_step<__nv_bfloat16>(float*, __nv_bfloat16*, const float*, float*, float*,
                                             size_t, const AdamWCoefficients<float>&, cudaStream_t);

}  // namespace mpiasr
