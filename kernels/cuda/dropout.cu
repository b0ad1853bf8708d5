// The gradient of a residual branch through its dropout, in grid-stride loops:
//   dbranch[i] = (dx[i] m_i) scale,   m_i = bits(seed, offset + i) >= threshold(p) ? 1 / (1 - p) :
//   0
// with 16 Philox bits per element (kernels/philox.h), the same masks as the
// CPU backend's and the fused forward ops'. Eight elements per thread step,
// one Philox block and one 128-bit access, when the offset is a multiple of
// eight and the pointers are 16-byte aligned; one element otherwise.
// Layout: flat arrays of n.
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/dropout.h"
#include "kernels/cuda/launch.h"
#include "src/base/error.h"

namespace mpiasr {

namespace cuda_kernels {
namespace {

template <int Width, typename T>
__global__ void residual_dropout_backward_kernel(T* dbranch, const T* dx, float scale,
                                                 DropoutSite site, size_t n) {
  MPIASR_GRID_STRIDE(j, n / Width) {
    const size_t i = j * Width;
    float x[Width], factor[Width];
    load_floats<Width>(dx + i, x);
    dropout_factors<Width>(site, i, factor);
    for (int e = 0; e < Width; ++e) x[e] = x[e] * factor[e] * scale;
    store_floats<Width>(dbranch + i, x);
  }
}

}  // namespace
}  // namespace cuda_kernels

using namespace cuda_kernels;

template <typename T>
void cuda_residual_dropout_backward(T* dbranch, const T* dx, float scale, float p,
                                    const uint64_t* seed, uint64_t offset, size_t n,
                                    cudaStream_t stream) {
  MPIASR_CHECK(p >= 0.0f && p <= 1.0f, "dropout probability " << p << " is outside [0, 1]");
  if (n == 0) return;
  const DropoutSite site = dropout_site(p, seed, offset);
  if (packed(dbranch, n) && packed(dx, n) && packed(site)) {
    constexpr auto backward = residual_dropout_backward_kernel<kPack, T>;
    MPIASR_LAUNCH(backward, grid_for(n / kPack), kThreads, 0, stream, dbranch, dx, scale, site, n);
  } else {
    constexpr auto backward = residual_dropout_backward_kernel<1, T>;
    MPIASR_LAUNCH(backward, grid_for(n), kThreads, 0, stream, dbranch, dx, scale, site, n);
  }
}

template void cuda_residual_dropout_backward<__half>(__half*, const __half*, float, float,
                                                     const uint64_t*, uint64_t, size_t,
                                                     cudaStream_t);
template void cuda_residual_dropout_backward<__nv_bfloat16>(__nv_bfloat16*, const __nv_bfloat16*,
                                                            float, float, const uint64_t*, uint64_t,
                                                            size_t, cudaStream_t);

}  // namespace mpiasr
