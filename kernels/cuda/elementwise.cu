// Elementwise kernels: casts and padding masks, in grid-stride loops; casts
// move eight 16-bit values per 128-bit load and store where the pointers
// allow (device_utils.cuh). Layouts: flat arrays of n; mask_padding [B, T, C].
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/elementwise.h"
#include "kernels/cuda/launch.h"

namespace mpiasr {

namespace cuda_kernels {
namespace {

// Eight elements per thread step when `packs`: the 16-bit side as one 128-bit
// access, the float side as two.
template <typename Dst, typename Src>
__global__ void cast_kernel(Dst* dst, const Src* src, size_t n, bool packs) {
  if (packs) {
    MPIASR_GRID_STRIDE(p, n / kPack) {
      if constexpr (sizeof(Src) == 2) {
        const Pack<Src> x = load_pack(src + p * kPack);
        const float4 lo =
            make_float4(to_float(x.v[0]), to_float(x.v[1]), to_float(x.v[2]), to_float(x.v[3]));
        const float4 hi =
            make_float4(to_float(x.v[4]), to_float(x.v[5]), to_float(x.v[6]), to_float(x.v[7]));
        reinterpret_cast<float4*>(dst + p * kPack)[0] = lo;
        reinterpret_cast<float4*>(dst + p * kPack)[1] = hi;
      } else {
        const float4 lo = reinterpret_cast<const float4*>(src + p * kPack)[0];
        const float4 hi = reinterpret_cast<const float4*>(src + p * kPack)[1];
        const float x[kPack] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
        Pack<Dst> y;
        for (int e = 0; e < kPack; ++e) y.v[e] = from_float<Dst>(x[e]);
        store_pack(dst + p * kPack, y);
      }
    }
    return;
  }
  MPIASR_GRID_STRIDE(i, n) dst[i] = from_float<Dst>(to_float(src[i]));
}

template <typename T>
__global__ void mask_padding_kernel(T* x, const int32_t* lengths, int B, int T_, int C) {
  const size_t n = size_t(B) * T_ * C;
  MPIASR_GRID_STRIDE(i, n) {
    const size_t row = i / size_t(C);
    const int b = int(row / size_t(T_)), t = int(row % size_t(T_));
    if (t >= lengths[b]) x[i] = from_float<T>(0.0f);
  }
}

}  // namespace
}  // namespace cuda_kernels

using namespace cuda_kernels;

template <typename Dst, typename Src>
void cuda_cast(Dst* dst, const Src* src, size_t n, cudaStream_t stream) {
  if (n == 0) return;
  const bool packs = packed(dst, n) && packed(src, n);
  constexpr auto cast = cast_kernel<Dst, Src>;
  MPIASR_LAUNCH(cast, grid_for(packs ? n / kPack : n), kThreads, 0, stream, dst, src, n, packs);
}

template <typename T>
void cuda_mask_padding(T* x, const int32_t* lengths, int B, int T_, int C, cudaStream_t stream) {
  const size_t n = size_t(B) * T_ * C;
  if (n == 0) return;
  MPIASR_LAUNCH(mask_padding_kernel<T>, grid_for(n), kThreads, 0, stream, x, lengths, B, T_, C);
}

#define MPIASR_INSTANTIATE(T)                                                \
  template void cuda_cast<T, float>(T*, const float*, size_t, cudaStream_t); \
  template void cuda_cast<float, T>(float*, const T*, size_t, cudaStream_t); \
  template void cuda_mask_padding<T>(T*, const int32_t*, int, int, int, cudaStream_t);
MPIASR_INSTANTIATE(__half)
MPIASR_INSTANTIATE(__nv_bfloat16)
#undef MPIASR_INSTANTIATE

}  // namespace mpiasr
