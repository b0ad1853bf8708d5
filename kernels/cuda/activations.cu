// Activation kernels: ReLU, Swish and GLU with their gradients, the
// per-element math of kernels/activations.h computed in float and rounded
// once, in grid-stride loops with eight 16-bit values per 128-bit load and
// store where the pointers and sizes allow (device_utils.cuh).
// Layouts: flat arrays of n; GLU [N, 2C] -> [N, C] with the value half first
// and the gate half second (packs of eight columns when C % 8 == 0).
#include "kernels/activations.h"
#include "kernels/cuda/activations.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.h"

namespace mpiasr {

namespace cuda_kernels {
namespace {

struct Relu {
  __device__ float operator()(float x) const { return relu(x); }
};
struct ReluGrad {
  __device__ float operator()(float x, float dy) const { return relu_grad(x, dy); }
};
struct Swish {
  __device__ float operator()(float x) const { return swish(x); }
};
struct SwishGrad {
  __device__ float operator()(float x, float dy) const { return swish_grad(x, dy); }
};

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
void cuda_relu_forward(T* out, const T* inp, size_t n, cudaStream_t stream) {
  launch_map1(out, inp, n, Relu{}, stream);
}

template <typename T>
void cuda_relu_backward(T* dinp, const T* dout, const T* inp, size_t n, cudaStream_t stream) {
  launch_map2(dinp, inp, dout, n, ReluGrad{}, stream);
}

template <typename T>
void cuda_swish_forward(T* out, const T* inp, size_t n, cudaStream_t stream) {
  launch_map1(out, inp, n, Swish{}, stream);
}

template <typename T>
void cuda_swish_backward(T* dinp, const T* dout, const T* inp, size_t n, cudaStream_t stream) {
  launch_map2(dinp, inp, dout, n, SwishGrad{}, stream);
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

#define MPIASR_INSTANTIATE(T)                                                         \
  template void cuda_relu_forward<T>(T*, const T*, size_t, cudaStream_t);             \
  template void cuda_relu_backward<T>(T*, const T*, const T*, size_t, cudaStream_t);  \
  template void cuda_swish_forward<T>(T*, const T*, size_t, cudaStream_t);            \
  template void cuda_swish_backward<T>(T*, const T*, const T*, size_t, cudaStream_t); \
  template void cuda_glu_forward<T>(T*, const T*, int, int, cudaStream_t);            \
  template void cuda_glu_backward<T>(T*, const T*, const T*, int, int, cudaStream_t);
MPIASR_INSTANTIATE(__half)
MPIASR_INSTANTIATE(__nv_bfloat16)
#undef MPIASR_INSTANTIATE

}  // namespace mpiasr
