// 3x3 stride-2 Conv2d, channels last, by im2col + cuBLAS GEMM
// (kernels/cuda/conv2d.cu). Shapes as in kernels/backend.h: inp [B, H, W, Cin],
// out [B, Ho, Wo, Cout], weight [Cout, Cin, 3, 3], bias [Cout].
#pragma once

#include <cublas_v2.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace mpiasr {

// Device scratch of one call, with the chunking it was sized for
// (conv2d_scratch_sizes).
struct Conv2dScratch {
  int images_per_chunk = 1;
  __half* weight_rows = nullptr;  // [Cout, 9 Cin], the weight as (kh, kw, ci) rows
  __half* columns = nullptr;      // [chunk rows, 9 Cin]
  __half* dcolumns = nullptr;     // [chunk rows, 9 Cin]       (backward with dinp)
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

void cuda_conv2d_forward(cublasHandle_t handle, cudaStream_t stream, __half* out, const __half* inp,
                         const __half* weight, const __half* bias, int B, int Cin, int H, int W,
                         int Cout, const Conv2dScratch& scratch);

// dinp overwritten (may be null); dweight, dbias += (may be null).
void cuda_conv2d_backward(cublasHandle_t handle, cudaStream_t stream, __half* dinp, float* dweight,
                          float* dbias, const __half* dout, const __half* inp, const __half* weight,
                          int B, int Cin, int H, int W, int Cout, const Conv2dScratch& scratch);

}  // namespace mpiasr
