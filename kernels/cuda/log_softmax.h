// Launcher of the log-softmax kernel (kernels/cuda/log_softmax.cu), over
// T = __half or __nv_bfloat16 logits.
#pragma once

#include <cuda_runtime.h>

namespace mpiasr {

// logprobs [N, V] (float) = log-softmax over V of logits [N, V] (T).
template <typename T>
void cuda_log_softmax_forward(float* logprobs, const T* logits, int N, int V, cudaStream_t stream);

}  // namespace mpiasr
