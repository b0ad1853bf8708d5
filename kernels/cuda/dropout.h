// Launcher of the dropout kernel (kernels/cuda/dropout.cu) over T = __half or
// __nv_bfloat16; masks from kernels/philox.h, the same as the CPU backend's.
// Device pointers.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mpiasr {

// out[i] = dropout_keep(seed, offset + i, p) ? inp[i] / (1 - p) : 0 (out may alias inp);
// the backward pass is the same map applied to the gradient.
template <typename T>
void cuda_dropout(T* out, const T* inp, float p, uint64_t seed, uint64_t offset, size_t n,
                  cudaStream_t stream);

}  // namespace mpiasr
