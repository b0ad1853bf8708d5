// Conv2d 3x3, stride 2, no padding, channels last, as im2col + GEMM over
// chunks of whole images (so the im2col matrix stays within a budget of
// elements, Conv2dScratch::images_per_chunk):
//   col [rows, 9 Cin]  row r = output pixel (b, i, j) of the chunk, column
//                      (kh 3 + kw) Cin + ci = inp[b, 2i + kh, 2j + kw, ci]
//   Wr  [Cout, 9 Cin]  Wr[co, (kh 3 + kw) Cin + ci] = W[co, ci, kh, kw]
//   forward   out_chunk [rows, Cout] = col Wr^T + bias   (max(., 0) with relu; both
//             in the GEMM's epilogue)
//   backward  dWr += dout_chunk^T col          (fp32 output, beta 1)
//             dcol = dout_chunk Wr ; dinp = col2im(dcol)
//             dbias += column sums of dout ; dW += Wr-layout dWr reordered
// col2im gathers: input pixel (h, w) of an image receives dcol from the
// output pixels (i, j) = ((h - kh) / 2, (w - kw) / 2) for the taps kh, kw that
// make both exact and in range, so every dinp element is written by exactly
// one thread (no atomics). Where Cin is a multiple of 8 (every layer but the
// first), im2col and col2im move eight channels a thread, one 128-bit access.
// GEMMs: 16-bit inputs, fp32 accumulation (gemm.h).
#include <algorithm>

#include "kernels/cuda/column_sums.h"
#include "kernels/cuda/conv2d.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/gemm.h"
#include "kernels/cuda/launch.h"
#include "src/base/error.h"

namespace mpiasr {

namespace cuda_kernels {
namespace {

int out_size(int n) {
  return (n - 3) / 2 + 1;
}

template <typename T>
__global__ void weight_rows_kernel(T* wr, const T* weight, int Cout, int Cin) {
  const size_t n = size_t(Cout) * 9 * Cin;
  MPIASR_GRID_STRIDE(e, n) {
    const int ci = int(e % size_t(Cin));
    const int k = int((e / size_t(Cin)) % 9);
    const int co = int(e / (size_t(9) * Cin));
    wr[e] = weight[(size_t(co) * Cin + ci) * 9 + k];
  }
}

__global__ void add_weight_rows_kernel(float* dweight, const float* dwr, int Cout, int Cin) {
  const size_t n = size_t(Cout) * 9 * Cin;
  MPIASR_GRID_STRIDE(e, n) {
    const int ci = int(e % size_t(Cin));
    const int k = int((e / size_t(Cin)) % 9);
    const int co = int(e / (size_t(9) * Cin));
    dweight[(size_t(co) * Cin + ci) * 9 + k] += dwr[e];
  }
}

// col [images Ho Wo, 9 Cin] of the images starting at `inp` (already offset
// to the chunk). A thread moves Width channels of one tap of one output pixel
// (one 128-bit load and store when Width is kPack); one 64-bit division per
// thread, the rest in 32 bits (rows fit an int).
template <int Width, typename T>
__global__ void im2col_kernel(T* col, const T* inp, int images, int Cin, int H, int W, int Ho,
                              int Wo) {
  const int groups = Cin / Width;  // channel groups of a tap
  const int row_groups = 9 * groups;
  const size_t n = size_t(images) * Ho * Wo * row_groups;
  MPIASR_GRID_STRIDE(e, n) {
    const int r = int(e / size_t(row_groups));
    const int in_row = int(e - size_t(r) * row_groups);
    const int k = in_row / groups, c = (in_row - k * groups) * Width;
    const int j = r % Wo, i = (r / Wo) % Ho, b = r / (Wo * Ho);
    const int h = 2 * i + k / 3, w = 2 * j + k % 3;
    const T* from = inp + ((size_t(b) * H + h) * W + w) * Cin + c;
    T* to = col + size_t(r) * 9 * Cin + size_t(k) * Cin + c;
    if constexpr (Width == kPack) {
      store_pack(to, load_pack(from));
    } else {
      to[0] = from[0];
    }
  }
}

// dinp [images, H, W, Cin] (offset to the chunk) from dcol [images Ho Wo,
// 9 Cin]: a thread sums Width channels of one input pixel over the (at most
// four) taps that read it.
template <int Width, typename T>
__global__ void col2im_kernel(T* dinp, const T* dcol, int images, int Cin, int H, int W, int Ho,
                              int Wo) {
  const int groups = Cin / Width;
  const size_t n = size_t(images) * H * W * groups;
  MPIASR_GRID_STRIDE(e, n) {
    const int pixel = int(e / size_t(groups));
    const int c = int(e - size_t(pixel) * groups) * Width;
    const int w = pixel % W, h = (pixel / W) % H, b = pixel / (W * H);
    float sum[Width] = {};
    for (int kh = 0; kh < 3; ++kh) {
      const int di = h - kh;
      if (di < 0 || di % 2 != 0 || di / 2 >= Ho) continue;
      for (int kw = 0; kw < 3; ++kw) {
        const int dj = w - kw;
        if (dj < 0 || dj % 2 != 0 || dj / 2 >= Wo) continue;
        const size_t r = (size_t(b) * Ho + di / 2) * Wo + dj / 2;
        float x[Width];
        load_floats<Width>(dcol + r * 9 * Cin + size_t(kh * 3 + kw) * Cin + c, x);
        for (int v = 0; v < Width; ++v) sum[v] += x[v];
      }
    }
    store_floats<Width>(dinp + size_t(pixel) * Cin + c, sum);
  }
}

}  // namespace
}  // namespace cuda_kernels

using namespace cuda_kernels;

namespace {

struct ConvShape {
  int B, Cin, H, W, Cout, Ho, Wo;
  int K() const { return 9 * Cin; }
  size_t pixels() const { return size_t(Ho) * Wo; }  // output pixels per image
};

ConvShape make_shape(int B, int Cin, int H, int W, int Cout) {
  MPIASR_CHECK(B >= 0 && Cin > 0 && Cout > 0 && H >= 3 && W >= 3,
               "conv2d needs at least a 3x3 input: B=" << B << " Cin=" << Cin << " H=" << H
                                                       << " W=" << W << " Cout=" << Cout);
  return {B, Cin, H, W, Cout, out_size(H), out_size(W)};
}

// col [images Ho Wo, 9 Cin] from the images at `inp`, eight channels a
// thread where Cin and the pointers allow.
template <typename T>
void launch_im2col(T* col, const T* inp, int images, const ConvShape& s, cudaStream_t stream) {
  const size_t n = size_t(images) * s.pixels() * s.K();
  if (packed(col, size_t(s.Cin)) && packed(inp, size_t(s.Cin))) {
    constexpr auto im2col = im2col_kernel<kPack, T>;
    MPIASR_LAUNCH(im2col, grid_for(n / kPack), kThreads, 0, stream, col, inp, images, s.Cin, s.H,
                  s.W, s.Ho, s.Wo);
  } else {
    constexpr auto im2col = im2col_kernel<1, T>;
    MPIASR_LAUNCH(im2col, grid_for(n), kThreads, 0, stream, col, inp, images, s.Cin, s.H, s.W, s.Ho,
                  s.Wo);
  }
}

// dinp [images, H, W, Cin] from dcol, eight channels a thread where Cin and
// the pointers allow.
template <typename T>
void launch_col2im(T* dinp, const T* dcol, int images, const ConvShape& s, cudaStream_t stream) {
  const size_t n = size_t(images) * s.H * s.W * s.Cin;
  if (packed(dinp, size_t(s.Cin)) && packed(dcol, size_t(s.Cin))) {
    constexpr auto col2im = col2im_kernel<kPack, T>;
    MPIASR_LAUNCH(col2im, grid_for(n / kPack), kThreads, 0, stream, dinp, dcol, images, s.Cin, s.H,
                  s.W, s.Ho, s.Wo);
  } else {
    constexpr auto col2im = col2im_kernel<1, T>;
    MPIASR_LAUNCH(col2im, grid_for(n), kThreads, 0, stream, dinp, dcol, images, s.Cin, s.H, s.W,
                  s.Ho, s.Wo);
  }
}

template <typename T>
void check_scratch(const Conv2dScratch<T>& scratch, bool backward_input, bool backward_weight,
                   bool backward_bias) {
  MPIASR_CHECK(scratch.weight_rows && scratch.columns && scratch.images_per_chunk >= 1,
               "conv2d scratch missing");
  MPIASR_CHECK(!backward_input || scratch.dcolumns, "conv2d scratch missing dcolumns");
  MPIASR_CHECK(!backward_weight || scratch.dweight_rows, "conv2d scratch missing dweight_rows");
  MPIASR_CHECK(!backward_bias || scratch.partials, "conv2d scratch missing partials");
}

}  // namespace

Conv2dScratchSizes conv2d_scratch_sizes(int B, int Cin, int H, int W, int Cout,
                                        size_t column_budget) {
  const ConvShape s = make_shape(B, Cin, H, W, Cout);
  Conv2dScratchSizes sizes;
  const size_t per_image = s.pixels() * size_t(s.K());
  sizes.images_per_chunk = int(std::clamp<size_t>(column_budget / std::max<size_t>(per_image, 1), 1,
                                                  size_t(std::max(B, 1))));
  sizes.weight_rows = size_t(Cout) * s.K();
  sizes.columns = size_t(sizes.images_per_chunk) * per_image;
  sizes.dweight_rows = size_t(Cout) * s.K();
  sizes.partials = size_t(column_chunks(int64_t(B) * int64_t(s.pixels()))) * Cout;
  return sizes;
}

template <typename T>
void cuda_conv2d_forward(const GemmContext& gemm, T* out, const T* inp, const T* weight,
                         const T* bias, int B, int Cin, int H, int W, int Cout, bool relu,
                         const Conv2dScratch<T>& scratch) {
  const cudaStream_t stream = gemm.stream;
  constexpr cudaDataType_t type = cuda_data_type<T>();
  const ConvShape s = make_shape(B, Cin, H, W, Cout);
  if (B == 0) return;
  check_scratch(scratch, false, false, false);
  const int K = s.K();
  const int chunk_images = scratch.images_per_chunk;
  MPIASR_LAUNCH(weight_rows_kernel<T>, grid_for(size_t(Cout) * K), kThreads, 0, stream,
                scratch.weight_rows, weight, Cout, Cin);
  const GemmEpilogue epilogue = relu ? (bias ? GemmEpilogue::kReluBias : GemmEpilogue::kRelu)
                                     : (bias ? GemmEpilogue::kBias : GemmEpilogue::kNone);
  for (int b0 = 0; b0 < B; b0 += chunk_images) {
    const int images = std::min(chunk_images, B - b0);
    const int rows = int(size_t(images) * s.pixels());
    launch_im2col(scratch.columns, inp + size_t(b0) * H * W * Cin, images, s, stream);
    // out_chunk [rows, Cout] = col [rows, K] Wr^T (+ bias, then max(., 0))
    cuda_gemm(gemm, "conv2d.forward", false, true, rows, Cout, K, 1.0f, scratch.columns, K,
              scratch.weight_rows, K, type, 0.0f, out + size_t(b0) * s.pixels() * Cout, type, Cout,
              epilogue, const_cast<T*>(bias));
  }
}

template <typename T>
void cuda_conv2d_backward(const GemmContext& gemm, T* dinp, float* dweight, float* dbias,
                          const T* dout, const T* inp, const T* weight, int B, int Cin, int H,
                          int W, int Cout, const Conv2dScratch<T>& scratch) {
  const cudaStream_t stream = gemm.stream;
  constexpr cudaDataType_t type = cuda_data_type<T>();
  const ConvShape s = make_shape(B, Cin, H, W, Cout);
  if (B == 0) return;
  check_scratch(scratch, dinp != nullptr, dweight != nullptr, dbias != nullptr);
  const int K = s.K();
  if (dbias) {
    cuda_add_column_sums(dbias, dout, int64_t(B) * int64_t(s.pixels()), Cout, scratch.partials,
                         stream);
  }
  if (!dinp && !dweight) return;
  const int chunk_images = scratch.images_per_chunk;
  // Only the input gradient reads the weight.
  if (dinp) {
    MPIASR_LAUNCH(weight_rows_kernel<T>, grid_for(size_t(Cout) * K), kThreads, 0, stream,
                  scratch.weight_rows, weight, Cout, Cin);
  }
  if (dweight) {
    zero_async(scratch.dweight_rows, sizeof(float) * size_t(Cout) * K, stream);
  }
  for (int b0 = 0; b0 < B; b0 += chunk_images) {
    const int images = std::min(chunk_images, B - b0);
    const int rows = int(size_t(images) * s.pixels());
    const T* dout_chunk = dout + size_t(b0) * s.pixels() * Cout;
    if (dweight) {
      launch_im2col(scratch.columns, inp + size_t(b0) * H * W * Cin, images, s, stream);
      // dWr [Cout, K] += dout_chunk^T [Cout, rows] col [rows, K]
      cuda_gemm(gemm, "conv2d.dweight", true, false, Cout, K, rows, 1.0f, dout_chunk, Cout,
                scratch.columns, K, type, 1.0f, scratch.dweight_rows, CUDA_R_32F, K);
    }
    if (dinp) {
      // dcol [rows, K] = dout_chunk [rows, Cout] Wr [Cout, K]
      cuda_gemm(gemm, "conv2d.dinp", false, false, rows, K, Cout, 1.0f, dout_chunk, Cout,
                scratch.weight_rows, K, type, 0.0f, scratch.dcolumns, type, K);
      launch_col2im(dinp + size_t(b0) * H * W * Cin, scratch.dcolumns, images, s, stream);
    }
  }
  if (dweight) {
    MPIASR_LAUNCH(add_weight_rows_kernel, grid_for(size_t(Cout) * K), kThreads, 0, stream, dweight,
                  scratch.dweight_rows, Cout, Cin);
  }
}

#define MPIASR_INSTANTIATE(T)                                                                     \
  template void cuda_conv2d_forward<T>(const GemmContext&, T*, const T*, const T*, const T*, int, \
                                       int, int, int, int, bool, const Conv2dScratch<T>&);        \
  template void cuda_conv2d_backward<T>(const GemmContext&, T*, float*, float*, const T*,         \
                                        const T*, const T*, int, int, int, int, int,              \
                                        const Conv2dScratch<T>&);
MPIASR_INSTANTIATE(__half)
MPIASR_INSTANTIATE(__nv_bfloat16)
#undef MPIASR_INSTANTIATE

}  // namespace mpiasr
