// Activation kernels: ReLU, Swish and GLU with their gradients, one thread per
// element in grid-stride loops, the per-element math of kernels/activations.h
// computed in float and rounded to half once.
// Layouts: flat arrays of n; GLU [N, 2C] -> [N, C] with the value half first
// and the gate half second.
#include "kernels/activations.h"
#include "kernels/cuda/activations.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.h"

namespace mpiasr {

namespace cuda_kernels {
namespace {

__global__ void relu_forward_kernel(__half* out, const __half* inp, size_t n) {
  MPIASR_GRID_STRIDE(i, n) out[i] = to_half(relu(to_float(inp[i])));
}

__global__ void relu_backward_kernel(__half* dinp, const __half* dout, const __half* inp,
                                     size_t n) {
  MPIASR_GRID_STRIDE(i, n) dinp[i] = to_half(relu_grad(to_float(inp[i]), to_float(dout[i])));
}

__global__ void swish_forward_kernel(__half* out, const __half* inp, size_t n) {
  MPIASR_GRID_STRIDE(i, n) out[i] = to_half(swish(to_float(inp[i])));
}

__global__ void swish_backward_kernel(__half* dinp, const __half* dout, const __half* inp,
                                      size_t n) {
  MPIASR_GRID_STRIDE(i, n) dinp[i] = to_half(swish_grad(to_float(inp[i]), to_float(dout[i])));
}

__global__ void glu_forward_kernel(__half* out, const __half* inp, int N, int C) {
  const size_t n = size_t(N) * C;
  MPIASR_GRID_STRIDE(i, n) {
    const size_t row = i / size_t(C), c = i % size_t(C);
    const __half* a = inp + row * 2 * C;
    out[i] = to_half(glu(to_float(a[c]), to_float(a[C + c])));
  }
}

__global__ void glu_backward_kernel(__half* dinp, const __half* dout, const __half* inp, int N,
                                    int C) {
  const size_t n = size_t(N) * C;
  MPIASR_GRID_STRIDE(i, n) {
    const size_t row = i / size_t(C), c = i % size_t(C);
    const __half* a = inp + row * 2 * C;
    float da = 0.0f, db = 0.0f;
    glu_grad(to_float(a[c]), to_float(a[C + c]), to_float(dout[i]), &da, &db);
    dinp[row * 2 * C + c] = to_half(da);
    dinp[row * 2 * C + C + c] = to_half(db);
  }
}

}  // namespace
}  // namespace cuda_kernels

using namespace cuda_kernels;

void cuda_relu_forward(__half* out, const __half* inp, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  MPIASR_LAUNCH(relu_forward_kernel, grid_for(n), kThreads, 0, stream, out, inp, n);
}

void cuda_relu_backward(__half* dinp, const __half* dout, const __half* inp, size_t n,
                        cudaStream_t stream) {
  if (n == 0) return;
  MPIASR_LAUNCH(relu_backward_kernel, grid_for(n), kThreads, 0, stream, dinp, dout, inp, n);
}

void cuda_swish_forward(__half* out, const __half* inp, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  MPIASR_LAUNCH(swish_forward_kernel, grid_for(n), kThreads, 0, stream, out, inp, n);
}

void cuda_swish_backward(__half* dinp, const __half* dout, const __half* inp, size_t n,
                         cudaStream_t stream) {
  if (n == 0) return;
  MPIASR_LAUNCH(swish_backward_kernel, grid_for(n), kThreads, 0, stream, dinp, dout, inp, n);
}

void cuda_glu_forward(__half* out, const __half* inp, int N, int C, cudaStream_t stream) {
  const size_t n = size_t(N) * C;
  if (n == 0) return;
  MPIASR_LAUNCH(glu_forward_kernel, grid_for(n), kThreads, 0, stream, out, inp, N, C);
}

void cuda_glu_backward(__half* dinp, const __half* dout, const __half* inp, int N, int C,
                       cudaStream_t stream) {
  const size_t n = size_t(N) * C;
  if (n == 0) return;
  MPIASR_LAUNCH(glu_backward_kernel, grid_for(n), kThreads, 0, stream, dinp, dout, inp, N, C);
}

}  // namespace mpiasr
