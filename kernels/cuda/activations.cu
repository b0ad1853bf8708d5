// Activation kernels: ReLU's gradient, Swish with the dropout after it, and
// GLU, the per-element math of kernels/activations.h computed in float and
// rounded once, in grid-stride loops with eight 16-bit values per 128-bit load
// and store where the pointers and sizes allow (device_utils.cuh):
//   swish_dropout  out = swish(x) m            dx = swish'(x) (dy m)
// with m the dropout factor of the element (1 / (1 - p) or 0, the CPU's
// Philox masks; a pack of eight is one Philox block).
// Layouts: flat arrays of n; GLU [N, 2C] -> [N, C] with the value half first
// and the gate half second (packs of eight columns when C % 8 == 0).
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

// Item j of the N (C / width) items: `width` columns starting at c of row `row`.
template <int Width, typename T>
__device__ void glu_forward_item(T* out, const T* inp, size_t j, int C) {
  const size_t items_per_row = size_t(C / Width);
  const size_t row = j / items_per_row, c = (j % items_per_row) * Width;
  const T* a = inp + row * 2 * C + c;
  if constexpr (Width == kPack) {
    const Pack<T> va = load_pack(a), vb = load_pack(a + C);
    Pack<T> o;
    for (int e = 0; e < Width; ++e)
      o.v[e] = from_float<T>(glu(to_float(va.v[e]), to_float(vb.v[e])));
    store_pack(out + row * C + c, o);
  } else {
    out[row * C + c] = from_float<T>(glu(to_float(a[0]), to_float(a[C])));
  }
}

template <typename T>
__global__ void glu_forward_kernel(T* out, const T* inp, int N, int C, bool packs) {
  const int width = packs ? kPack : 1;
  const size_t items = size_t(N) * (C / width);
  MPIASR_GRID_STRIDE(j, items) {
    if (packs) {
      glu_forward_item<kPack>(out, inp, j, C);
    } else {
      glu_forward_item<1>(out, inp, j, C);
    }
  }
}

template <int Width, typename T>
__device__ void glu_backward_item(T* dinp, const T* dout, const T* inp, size_t j, int C) {
  const size_t items_per_row = size_t(C / Width);
  const size_t row = j / items_per_row, c = (j % items_per_row) * Width;
  const T* a = inp + row * 2 * C + c;
  T* da = dinp + row * 2 * C + c;
  const T* dy = dout + row * C + c;
  if constexpr (Width == kPack) {
    const Pack<T> va = load_pack(a), vb = load_pack(a + C), vdy = load_pack(dy);
    Pack<T> oa, ob;
    for (int e = 0; e < Width; ++e) {
      float ga = 0.0f, gb = 0.0f;
      glu_grad(to_float(va.v[e]), to_float(vb.v[e]), to_float(vdy.v[e]), &ga, &gb);
      oa.v[e] = from_float<T>(ga);
      ob.v[e] = from_float<T>(gb);
    }
    store_pack(da, oa);
    store_pack(da + C, ob);
  } else {
    float ga = 0.0f, gb = 0.0f;
    glu_grad(to_float(a[0]), to_float(a[C]), to_float(dy[0]), &ga, &gb);
    da[0] = from_float<T>(ga);
    da[C] = from_float<T>(gb);
  }
}

template <typename T>
__global__ void glu_backward_kernel(T* dinp, const T* dout, const T* inp, int N, int C,
                                    bool packs) {
  const int width = packs ? kPack : 1;
  const size_t items = size_t(N) * (C / width);
  MPIASR_GRID_STRIDE(j, items) {
    if (packs) {
      glu_backward_item<kPack>(dinp, dout, inp, j, C);
    } else {
      glu_backward_item<1>(dinp, dout, inp, j, C);
    }
  }
}

// Packs need C % 8 == 0 (rows and halves stay 16-byte aligned) and aligned bases.
bool glu_packs(const void* a, const void* b, const void* c, int C) {
  return C % kPack == 0 && packed(a, 0) && packed(b, 0) && (!c || packed(c, 0));
}

}  // namespace
}  // namespace cuda_kernels

using namespace cuda_kernels;

template <typename T>
void cuda_relu_backward(T* dinp, const T* dout, const T* inp, size_t n, cudaStream_t stream) {
  launch_map2(dinp, inp, dout, n, ReluGrad{}, stream);
}

template <typename T>
void cuda_swish_dropout_forward(T* out, const T* inp, float p, uint64_t seed, uint64_t offset,
                                size_t n, cudaStream_t stream) {
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
void cuda_swish_dropout_backward(T* dinp, const T* dout, const T* inp, float p, uint64_t seed,
                                 uint64_t offset, size_t n, cudaStream_t stream) {
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

template <typename T>
void cuda_glu_forward(T* out, const T* inp, int N, int C, cudaStream_t stream) {
  const size_t n = size_t(N) * C;
  if (n == 0) return;
  const bool packs = glu_packs(out, inp, nullptr, C);
  MPIASR_LAUNCH(glu_forward_kernel<T>, grid_for(packs ? n / kPack : n), kThreads, 0, stream, out,
                inp, N, C, packs);
}

template <typename T>
void cuda_glu_backward(T* dinp, const T* dout, const T* inp, int N, int C, cudaStream_t stream) {
  const size_t n = size_t(N) * C;
  if (n == 0) return;
  const bool packs = glu_packs(dinp, dout, inp, C);
  MPIASR_LAUNCH(glu_backward_kernel<T>, grid_for(packs ? n / kPack : n), kThreads, 0, stream, dinp,
                dout, inp, N, C, packs);
}

#define MPIASR_INSTANTIATE(T)                                                                     \
  template void cuda_relu_backward<T>(T*, const T*, const T*, size_t, cudaStream_t);              \
  template void cuda_swish_dropout_forward<T>(T*, const T*, float, uint64_t, uint64_t, size_t,    \
                                              cudaStream_t);                                      \
  template void cuda_swish_dropout_backward<T>(T*, const T*, const T*, float, uint64_t, uint64_t, \
                                               size_t, cudaStream_t);                             \
  template void cuda_glu_forward<T>(T*, const T*, int, int, cudaStream_t);                        \
  template void cuda_glu_backward<T>(T*, const T*, const T*, int, int, cudaStream_t);
MPIASR_INSTANTIATE(__half)
MPIASR_INSTANTIATE(__nv_bfloat16)
#undef MPIASR_INSTANTIATE

}  // namespace mpiasr
