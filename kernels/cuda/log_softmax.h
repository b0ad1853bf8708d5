// Launcher of the log-softmax kernel (kernels/cuda/log_softmax.cu).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace mpiasr {

// logprobs [N, V] (float) = log-softmax over V of logits [N, V] (half).
void cuda_log_softmax_forward(float* logprobs, const __half* logits, int N, int V,
                              cudaStream_t stream);

}  // namespace mpiasr
