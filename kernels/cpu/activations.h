// Elementwise activations on the CPU over n values (math in kernels/activations.h):
//   relu, swish:  out[i] = f(inp[i]);           dinp[i] = f'(inp[i]) dout[i]
//   GLU:          inp [N, 2C] = [a | b] per row, out [N, C] = a sigmoid(b)
//                 dinp [N, 2C] = [dout sigmoid(b) | dout a sigmoid(b)(1 - sigmoid(b))]
// Input gradients are overwritten. Split over the OpenMP team.
#pragma once

#include <cstddef>

namespace mpiasr {

template <typename T>
void cpu_relu_forward(T* out, const T* inp, size_t n);
template <typename T>
void cpu_relu_backward(T* dinp, const T* dout, const T* inp, size_t n);
template <typename T>
void cpu_swish_forward(T* out, const T* inp, size_t n);
template <typename T>
void cpu_swish_backward(T* dinp, const T* dout, const T* inp, size_t n);
template <typename T>
void cpu_glu_forward(T* out, const T* inp, int N, int C);
template <typename T>
void cpu_glu_backward(T* dinp, const T* dout, const T* inp, int N, int C);

}  // namespace mpiasr
