// Launchers of the activation kernels (kernels/cuda/activations.cu): ReLU's
// gradient (its forward is the conv2d GEMM's epilogue), Swish with the dropout
// after it, over T = __half or __nv_bfloat16, in float with the
// per-element math of kernels/activations.h, rounded to T once. All pointers
// are device pointers; input gradients are overwritten.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace mpiasr {

template <typename T>
void cuda_relu_backward(T* dinp, const T* dout, const T* inp, size_t n, cudaStream_t stream);
// out = Dropout_p(swish(inp)) (seed, offset; the CPU's masks)
template <typename T>
void cuda_swish_dropout_forward(T* out, const T* inp, float p, const uint64_t* seed,
                                uint64_t offset, size_t n, cudaStream_t stream);
// dinp = swish'(inp) Dropout_p(dout), the same mask
template <typename T>
void cuda_swish_dropout_backward(T* dinp, const T* dout, const T* inp, float p,
                                 const uint64_t* seed, uint64_t offset, size_t n,
                                 cudaStream_t stream);

}  // namespace mpiasr
