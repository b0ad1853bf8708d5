// Activation kernels: ReLU's gradient and Swish with the dropout after it
// (GLU is computed inside the depthwise convolution, depthwise_conv1d.cu), the
// per-element math of kernels/activations.h computed in float and
// rounded once, in grid-stride loops with eight 16-bit values per 128-bit load
// and store where the pointers and sizes allow (device_utils.cuh):
//   swish_dropout  out = swish(x) m            dx = swish'(x) (dy m)
// with m the dropout factor of the element (1 / (1 - p) or 0, the CPU's
// Philox masks; a pack of eight is one Philox block).
// Layout: flat arrays of n.
#include "kernels/activations.h"
#include "kernels/cuda/activations.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.h"
#include "src/base/error.h"

namespace mpiasr {

namespace cuda_kernels {
namespace {

struct ReluGrad {
  __device__ float operator()(float x, float dy) const { return relu_grad(x, dy); }
};

template <int Width, typename T>
__global__ void swish_dropout_forward_kernel(T* out, const T* inp, DropoutSite site, size_t n) {
  MPIASR_GRID_STRIDE(j, n / Width) {
    const size_t i = j * Width;
    float x[Width], factor[Width];
    load_floats<Width>(inp + i, x);
    dropout_factors<Width>(site, i, factor);
    for (int e = 0; e < Width; ++e) x[e] = swish(x[e]) * factor[e];
    store_floats<Width>(out + i, x);
  }
}

template <int Width, typename T>
__global__ void swish_dropout_backward_kernel(T* dinp, const T* dout, const T* inp,
                                              DropoutSite site, size_t n) {
  MPIASR_GRID_STRIDE(j, n / Width) {
    const size_t i = j * Width;
    float x[Width], dy[Width], factor[Width];
    load_floats<Width>(inp + i, x);
    load_floats<Width>(dout + i, dy);
    dropout_factors<Width>(site, i, factor);
    for (int e = 0; e < Width; ++e) dy[e] = swish_grad(x[e], dy[e] * factor[e]);
    store_floats<Width>(dinp + i, dy);
  }
}

}  // namespace
}  // namespace cuda_kernels

using namespace cuda_kernels;

template <typename T>
void cuda_relu_backward(T* dinp, const T* dout, const T* inp, size_t n, cudaStream_t stream) {
  launch_map2(dinp, inp, dout, n, ReluGrad{}, stream);
}

template <typename T>
void cuda_swish_dropout_forward(T* out, const T* inp, float p, const uint64_t* seed,
                                uint64_t offset, size_t n, cudaStream_t stream) {
  MPIASR_CHECK(p >= 0.0f && p <= 1.0f, "dropout probability " << p << " is outside [0, 1]");
  if (n == 0) return;
  const DropoutSite site = dropout_site(p, seed, offset);
  if (packed(out, n) && packed(inp, n) && packed(site)) {
    constexpr auto forward = swish_dropout_forward_kernel<kPack, T>;
    MPIASR_LAUNCH(forward, grid_for(n / kPack), kThreads, 0, stream, out, inp, site, n);
  } else {
    constexpr auto forward = swish_dropout_forward_kernel<1, T>;
    MPIASR_LAUNCH(forward, grid_for(n), kThreads, 0, stream, out, inp, site, n);
  }
}

template <typename T>
void cuda_swish_dropout_backward(T* dinp, const T* dout, const T* inp, float p,
                                 const uint64_t* seed, uint64_t offset, size_t n,
                                 cudaStream_t stream) {
  MPIASR_CHECK(p >= 0.0f && p <= 1.0f, "dropout probability " << p << " is outside [0, 1]");
  if (n == 0) return;
  const DropoutSite site = dropout_site(p, seed, offset);
  if (packed(dinp, n) && packed(dout, n) && packed(inp, n) && packed(site)) {
    constexpr auto backward = swish_dropout_backward_kernel<kPack, T>;
    MPIASR_LAUNCH(backward, grid_for(n / kPack), kThreads, 0, stream, dinp, dout, inp, site, n);
  } else {
    constexpr auto backward = swish_dropout_backward_kernel<1, T>;
    MPIASR_LAUNCH(backward, grid_for(n), kThreads, 0, stream, dinp, dout, inp, site, n);
  }
}

#define MPIASR_INSTANTIATE(T)                                                                  \
  template void cuda_relu_backward<T>(T*, const T*, const T*, size_t, cudaStream_t);           \
  template void cuda_swish_dropout_forward<T>(T*, const T*, float, const uint64_t*, uint64_t,  \
                                              size_t, cudaStream_t);                           \
  template void cuda_swish_dropout_backward<T>(T*, const T*, const T*, float, const uint64_t*, \
                                               uint64_t, size_t, cudaStream_t);
MPIASR_INSTANTIATE(__half)
MPIASR_INSTANTIATE(__nv_bfloat16)
#undef MPIASR_INSTANTIATE

}  // namespace mpiasr
