// 3x3 stride-2 Conv2d, channels last, by im2col + cuBLASLt GEMM
// (kernels/cuda/conv2d.cu). Shapes as in kernels/backend.h: inp [B, H, W, Cin],
// out [B, Ho, Wo, Cout], weight [Cout, Cin, 3, 3], bias [Cout]; activations and
// weights in T = __half or __nv_bfloat16.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/cuda/gemm.h"

namespace mpiasr {

// Device scratch of one call, with the chunking it was sized for
// (conv2d_scratch_sizes).
template <typename T>
struct Conv2dScratch {
  int images_per_chunk = 1;
  T* weight_rows = nullptr;       // [Cout, 9 Cin], the weight as (kh, kw, ci) rows
  T* columns = nullptr;           // [chunk rows, 9 Cin]
  T* dcolumns = nullptr;          // [chunk rows, 9 Cin]       (backward with dinp)
  float* dweight_rows = nullptr;  // [Cout, 9 Cin]             (backward with dweight)
  float* partials = nullptr;      // bias column-sum partials  (backward with dbias)
};

struct Conv2dScratchSizes {
  int images_per_chunk = 1;
  size_t weight_rows = 0, columns = 0, dweight_rows = 0, partials = 0;  // elements
};

// Images per chunk so that a chunk's im2col matrix holds at most
// column_budget elements (at least one image), and the scratch that takes.
Conv2dScratchSizes conv2d_scratch_sizes(int B, int Cin, int H, int W, int Cout,
                                        size_t column_budget);

// With relu the output is max(conv + bias, 0).
template <typename T>
void cuda_conv2d_forward(const GemmContext& gemm, T* out, const T* inp, const T* weight,
                         const T* bias, int B, int Cin, int H, int W, int Cout, bool relu,
                         const Conv2dScratch<T>& scratch);

// dinp overwritten (may be null); dweight, dbias += (may be null).
template <typename T>
void cuda_conv2d_backward(const GemmContext& gemm, T* dinp, float* dweight, float* dbias,
                          const T* dout, const T* inp, const T* weight, int B, int Cin, int H,
                          int W, int Cout, const Conv2dScratch<T>& scratch);

}  // namespace mpiasr
