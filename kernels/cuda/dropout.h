// Launcher of the dropout kernel (kernels/cuda/dropout.cu) over T = __half or
// __nv_bfloat16; masks from kernels/philox.h, the same as the CPU backend's.
// The forward masks are applied inside the fused ops (layernorm.h,
// activations.h); this is the gradient of a residual branch. Device pointers.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mpiasr {

// dbranch[i] = scale (dropout_keep(seed, offset + i, p) ? dx[i] / (1 - p) : 0)
// (dbranch may alias dx).
template <typename T>
void cuda_residual_dropout_backward(T* dbranch, const T* dx, float scale, float p,
                                    const uint64_t* seed, uint64_t offset, size_t n,
                                    cudaStream_t stream);

}  // namespace mpiasr
