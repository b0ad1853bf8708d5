// Log-softmax over V of each row of logits [N, V], one warp per row:
//   y = x - (max + log sum exp(x - max)),  in float (16-bit logits, float out).
// Its backward pass is part of the CTC loss (kernels/cuda/ctc_loss.cu).
#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/log_softmax.h"

namespace mpiasr {

namespace cuda_kernels {
namespace {

constexpr int kRowsPerBlock = kThreads / kWarp;

template <typename T>
__global__ void log_softmax_kernel(float* logprobs, const T* logits, int N, int V) {
  const int lane = threadIdx.x % kWarp;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= N) return;
  const T* x = logits + size_t(row) * V;
  float* y = logprobs + size_t(row) * V;
  float max = -INFINITY;
  for (int v = lane; v < V; v += kWarp) max = fmaxf(max, to_float(x[v]));
  max = warp_max(max);
  float sum = 0.0f;
  for (int v = lane; v < V; v += kWarp) sum += expf(to_float(x[v]) - max);
  const float log_norm = max + logf(warp_sum(sum));
  for (int v = lane; v < V; v += kWarp) y[v] = to_float(x[v]) - log_norm;
}

}  // namespace
}  // namespace cuda_kernels

using namespace cuda_kernels;

template <typename T>
void cuda_log_softmax_forward(float* logprobs, const T* logits, int N, int V, cudaStream_t stream) {
  if (N <= 0 || V <= 0) return;
  const unsigned blocks = unsigned((N + kRowsPerBlock - 1) / kRowsPerBlock);
  MPIASR_LAUNCH(log_softmax_kernel<T>, blocks, kThreads, 0, stream, logprobs, logits, N, V);
}

template void cuda_log_softmax_forward<__half>(float*, const __half*, int, int, cudaStream_t);
template void cuda_log_softmax_forward<__nv_bfloat16>(float*, const __nv_bfloat16*, int, int,
                                                      cudaStream_t);

}  // namespace mpiasr
