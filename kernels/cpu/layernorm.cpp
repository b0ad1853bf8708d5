// LayerNorm forward and backward, two-pass statistics (see layernorm.h).
#include "kernels/cpu/layernorm.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/parallel.h"

#define MPIASR_SIMD_SOURCE "kernels/cpu/layernorm_simd.h"
#include "kernels/cpu/simd_levels.h"

namespace mpiasr {

template <typename T>
void cpu_layernorm_forward(T* out, T* mean, T* rstd, const T* inp, const T* weight, const T* bias,
                           int N, int C, float eps) {
  MPIASR_SIMD_CALL(cpu_layernorm_forward, out, mean, rstd, inp, weight, bias, N, C, eps);
}

template <typename T>
void cpu_layernorm_backward(T* dinp, T* dweight, T* dbias, const T* dout, const T* inp,
                            const T* weight, const T* mean, const T* rstd, int N, int C,
                            bool accumulate) {
  MPIASR_SIMD_CALL(cpu_layernorm_backward, dinp, dweight, dbias, dout, inp, weight, mean, rstd, N,
                   C, accumulate);
}

template void cpu_layernorm_forward<float>(float*, float*, float*, const float*, const float*,
                                           const float*, int, int, float);
template void cpu_layernorm_forward<double>(double*, double*, double*, const double*, const double*,
                                            const double*, int, int, float);
template void cpu_layernorm_backward<float>(float*, float*, float*, const float*, const float*,
                                            const float*, const float*, const float*, int, int,
                                            bool);
template void cpu_layernorm_backward<double>(double*, double*, double*, const double*,
                                             const double*, const double*, const double*,
                                             const double*, int, int, bool);

}  // namespace mpiasr
