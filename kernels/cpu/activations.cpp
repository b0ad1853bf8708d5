// Elementwise activation loops over the shared per-element math (see activations.h).
#include "kernels/cpu/activations.h"

#include <cstdint>

#include "kernels/activations.h"
#include "kernels/cpu/parallel.h"

#define MPIASR_SIMD_SOURCE "kernels/cpu/activations_simd.h"
#include "kernels/cpu/simd_levels.h"

namespace mpiasr {

template <typename T>
void cpu_relu_forward(T* out, const T* inp, size_t n) {
  MPIASR_SIMD_CALL(cpu_relu_forward, out, inp, n);
}

template <typename T>
void cpu_relu_backward(T* dinp, const T* dout, const T* inp, size_t n) {
  MPIASR_SIMD_CALL(cpu_relu_backward, dinp, dout, inp, n);
}

template <typename T>
void cpu_swish_forward(T* out, const T* inp, size_t n) {
  MPIASR_SIMD_CALL(cpu_swish_forward, out, inp, n);
}

template <typename T>
void cpu_swish_backward(T* dinp, const T* dout, const T* inp, size_t n) {
  MPIASR_SIMD_CALL(cpu_swish_backward, dinp, dout, inp, n);
}

template <typename T>
void cpu_glu_forward(T* out, const T* inp, int N, int C) {
  MPIASR_SIMD_CALL(cpu_glu_forward, out, inp, N, C);
}

template <typename T>
void cpu_glu_backward(T* dinp, const T* dout, const T* inp, int N, int C) {
  MPIASR_SIMD_CALL(cpu_glu_backward, dinp, dout, inp, N, C);
}

#define MPIASR_INSTANTIATE(T)                                          \
  template void cpu_relu_forward<T>(T*, const T*, size_t);             \
  template void cpu_relu_backward<T>(T*, const T*, const T*, size_t);  \
  template void cpu_swish_forward<T>(T*, const T*, size_t);            \
  template void cpu_swish_backward<T>(T*, const T*, const T*, size_t); \
  template void cpu_glu_forward<T>(T*, const T*, int, int);            \
  template void cpu_glu_backward<T>(T*, const T*, const T*, int, int);
MPIASR_INSTANTIATE(float)
MPIASR_INSTANTIATE(double)
#undef MPIASR_INSTANTIATE

}  // namespace mpiasr
