// LayerNorm over the last dimension of x [N, C] (rows contiguous), as the CPU
// backend computes it, with float statistics, and its fusions with the
// residual sum before it and the Swish after it:
//   residual  x = base + scale Dropout(branch), written rounded to T, then LN(x)
//   LN        mean = sum x / C    var = sum (x - mean)^2 / C    rstd = 1 / sqrt(var + eps)
//             xhat = (x - mean) rstd                             y = xhat w + b
//   swish     s = swish(y), from y as rounded to T (what backward reads)
// Backward, with g = dy (or swish'(y) dy after a Swish) times w:
//   dx (+)= rstd (g - mean_c(g) - xhat mean_c(g xhat))
//   dw += sum_rows g/w xhat                           db += sum_rows g/w
// Forward and the dx pass: one warp per row, two or three passes over the row
// (the later ones hit L1), lanes striding over C eight values at a time (one
// 128-bit access) when C % 8 == 0 and the pointers are 16-byte aligned, one
// at a time otherwise. dw and db: per-chunk column partials in float, eight
// columns per thread likewise, the chunk's rows spread over 16 adjacent
// threads (every 16th row each, summed by a butterfly of shuffles), so a
// block of up to 1024 threads keeps 16 rows of loads in flight at a time;
// then the partials added in chunk order (deterministic; see column_sums.h).
#include <algorithm>
#include <initializer_list>

#include "kernels/activations.h"
#include "kernels/cuda/column_sums.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.h"
#include "kernels/cuda/layernorm.h"

namespace mpiasr {

namespace cuda_kernels {
namespace {

constexpr int kRowsPerBlock = kThreads / kWarp;

enum class Norm { kPlain, kResidual, kSwish };

// The forward kernel's arguments (and BackwardArgs below), widest members
// first: no padding, as a step graph signs a kernel's struct argument by its
// bytes (kernels/cuda/step_graph.h).
struct ForwardArgs {
  void* out;           // LN(x) [N, C]
  void* extra;         // kResidual: x [N, C]; kSwish: swish(LN(x)) [N, C]
  float* mean;         // [N], may be null
  float* rstd;         // [N], may be null
  const void* inp;     // x, or for kResidual the base
  const void* branch;  // kResidual
  const void* weight;  // [C], null: 1
  const void* bias;    // [C], null: 0
  DropoutSite site;    // kResidual
  float scale;         // kResidual
  int N, C;
  float eps;
};

template <int Width, typename T, Norm kNorm>
__global__ void layernorm_forward_kernel(ForwardArgs a) {
  const int lane = threadIdx.x % kWarp;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= a.N) return;
  const size_t first = size_t(row) * a.C;
  const T* x = static_cast<const T*>(a.inp) + first;
  T* y = static_cast<T*>(a.out) + first;
  const T* weight = static_cast<const T*>(a.weight);
  const T* bias = static_cast<const T*>(a.bias);
  float v[Width];
  float sum = 0.0f;
  if constexpr (kNorm == Norm::kResidual) {
    // x = base + scale Dropout(branch), rounded as stored; the statistics of the stored x.
    const T* branch = static_cast<const T*>(a.branch) + first;
    T* sum_out = static_cast<T*>(a.extra) + first;
    for (int c = Width * lane; c < a.C; c += Width * kWarp) {
      float r[Width], factor[Width];
      load_floats<Width>(x + c, v);
      load_floats<Width>(branch + c, r);
      dropout_factors<Width>(a.site, first + c, factor);
      for (int e = 0; e < Width; ++e) {
        v[e] = to_float(from_float<T>(v[e] + a.scale * (r[e] * factor[e])));
        sum += v[e];
      }
      store_floats<Width>(sum_out + c, v);
    }
    x = sum_out;
  } else {
    for (int c = Width * lane; c < a.C; c += Width * kWarp) {
      load_floats<Width>(x + c, v);
      for (int e = 0; e < Width; ++e) sum += v[e];
    }
  }
  const float m = warp_sum(sum) / float(a.C);
  float sum_sq = 0.0f;
  for (int c = Width * lane; c < a.C; c += Width * kWarp) {
    load_floats<Width>(x + c, v);
    for (int e = 0; e < Width; ++e) sum_sq += (v[e] - m) * (v[e] - m);
  }
  const float r = 1.0f / sqrtf(warp_sum(sum_sq) / float(a.C) + a.eps);
  for (int c = Width * lane; c < a.C; c += Width * kWarp) {
    float w[Width], b[Width];
    load_floats<Width>(x + c, v);
    if (weight) {
      load_floats<Width>(weight + c, w);
    } else {
      for (float& e : w) e = 1.0f;
    }
    if (bias) {
      load_floats<Width>(bias + c, b);
    } else {
      for (float& e : b) e = 0.0f;
    }
    for (int e = 0; e < Width; ++e) v[e] = (v[e] - m) * r * w[e] + b[e];
    store_floats<Width>(y + c, v);
    if constexpr (kNorm == Norm::kSwish) {
      for (int e = 0; e < Width; ++e) v[e] = swish(to_float(from_float<T>(v[e])));
      store_floats<Width>(static_cast<T*>(a.extra) + first + c, v);
    }
  }
  if (lane == 0) {
    if (a.mean) a.mean[row] = m;
    if (a.rstd) a.rstd[row] = r;
  }
}

// The backward kernels' arguments; the dx kernel's `accumulate` is one of
// its own (as a member it would leave padding).
struct BackwardArgs {
  void* dinp;          // [N, C]
  const void* dout;    // [N, C]
  const void* inp;     // x [N, C]
  const void* normed;  // LN(x) [N, C] (with a Swish after)
  const void* weight;  // [C], null: 1
  const float* mean;
  const float* rstd;
  int N, C;
};

// The gradient reaching LN's output: dy, or swish'(y) dy after a Swish.
template <int Width, typename T, bool kSwish>
__device__ inline void output_gradient(const BackwardArgs& a, size_t at, float* g) {
  load_floats<Width>(static_cast<const T*>(a.dout) + at, g);
  if constexpr (kSwish) {
    float y[Width];
    load_floats<Width>(static_cast<const T*>(a.normed) + at, y);
    for (int e = 0; e < Width; ++e) g[e] = swish_grad(y[e], g[e]);
  }
}

template <int Width, typename T, bool kSwish>
__global__ void layernorm_backward_input_kernel(BackwardArgs a, bool accumulate) {
  const int lane = threadIdx.x % kWarp;
  const int row = blockIdx.x * kRowsPerBlock + threadIdx.x / kWarp;
  if (row >= a.N) return;
  const size_t first = size_t(row) * a.C;
  const T* x = static_cast<const T*>(a.inp) + first;
  const T* weight = static_cast<const T*>(a.weight);
  T* dx = static_cast<T*>(a.dinp) + first;
  const float m = a.mean[row], r = a.rstd[row];
  float g[Width], v[Width], w[Width];
  auto load_weight = [&](int c) {
    if (weight) {
      load_floats<Width>(weight + c, w);
    } else {
      for (float& e : w) e = 1.0f;
    }
  };
  float sum_g = 0.0f, sum_g_xhat = 0.0f;
  for (int c = Width * lane; c < a.C; c += Width * kWarp) {
    output_gradient<Width, T, kSwish>(a, first + c, g);
    load_floats<Width>(x + c, v);
    load_weight(c);
    for (int e = 0; e < Width; ++e) {
      sum_g += g[e] * w[e];
      sum_g_xhat += g[e] * w[e] * (v[e] - m) * r;
    }
  }
  const float mean_g = warp_sum(sum_g) / float(a.C);
  const float mean_g_xhat = warp_sum(sum_g_xhat) / float(a.C);
  for (int c = Width * lane; c < a.C; c += Width * kWarp) {
    float d[Width];
    output_gradient<Width, T, kSwish>(a, first + c, g);
    load_floats<Width>(x + c, v);
    load_weight(c);
    if (accumulate) {
      load_floats<Width>(dx + c, d);
    } else {
      for (float& e : d) e = 0.0f;
    }
    for (int e = 0; e < Width; ++e) {
      const float xhat = (v[e] - m) * r;
      d[e] += r * (g[e] * w[e] - mean_g - xhat * mean_g_xhat);
    }
    store_floats<Width>(dx + c, d);
  }
}

// The parameter gradients' threads: kParamLanes adjacent threads share Width
// columns, each summing every kParamLanes-th row of the chunk, two rows a
// step (both rows' loads in flight together); a block holds up to
// kParamColumnThreads such groups (512 threads), so that `large`'s 64
// chunks of C = 512 make 128 blocks, about one per multiprocessor.
constexpr int kParamLanes = 16;
constexpr int kParamColumnThreads = 32;

// partials_w / partials_b [chunks, C]: sums over the chunk's rows of g xhat
// and g (g the output gradient); the block's column groups are blockDim.x /
// kParamLanes wide.
template <int Width, typename T, bool kSwish>
__global__ void layernorm_param_partials_kernel(BackwardArgs a, float* partials_w,
                                                float* partials_b, int rows_per_chunk) {
  const int lane = threadIdx.x % kParamLanes;
  const int columns = blockDim.x / kParamLanes;
  const int c = Width * int(blockIdx.x * columns + threadIdx.x / kParamLanes);
  const int chunk = blockIdx.y;
  const bool active = c < a.C;  // the others still take part in the shuffles
  const int begin = chunk * rows_per_chunk;
  const int end = begin + rows_per_chunk < a.N ? begin + rows_per_chunk : a.N;
  float sum_w[Width] = {}, sum_b[Width] = {};
  const auto add_row = [&](int n) {
    const size_t at = size_t(n) * a.C + c;
    float g[Width], v[Width];
    output_gradient<Width, T, kSwish>(a, at, g);
    load_floats<Width>(static_cast<const T*>(a.inp) + at, v);
    for (int e = 0; e < Width; ++e) {
      sum_w[e] += g[e] * (v[e] - a.mean[n]) * a.rstd[n];
      sum_b[e] += g[e];
    }
  };
  for (int n = begin + lane; active && n < end; n += 2 * kParamLanes) {
    add_row(n);
    if (n + kParamLanes < end) add_row(n + kParamLanes);
  }
  // The group's kParamLanes sums, by a butterfly within the group: every
  // lane ends with the same total, added in the same order.
  for (int offset = kParamLanes / 2; offset > 0; offset /= 2) {
    for (int e = 0; e < Width; ++e) {
      sum_w[e] += __shfl_xor_sync(0xffffffffu, sum_w[e], offset);
      sum_b[e] += __shfl_xor_sync(0xffffffffu, sum_b[e], offset);
    }
  }
  if (!active || lane != 0) return;
  for (int e = 0; e < Width; ++e) {
    partials_w[size_t(chunk) * a.C + c + e] = sum_w[e];
    partials_b[size_t(chunk) * a.C + c + e] = sum_b[e];
  }
}

// Whether rows of C values at these pointers go in packs.
bool rows_packed(int C, std::initializer_list<const void*> pointers) {
  if (C % kPack != 0) return false;
  for (const void* p : pointers) {
    if (p && !packed(p, 0)) return false;
  }
  return true;
}

template <typename T, Norm kNorm>
void launch_forward(const ForwardArgs& args, bool packs, cudaStream_t stream) {
  if (args.N <= 0 || args.C <= 0) return;
  const unsigned blocks = unsigned((args.N + kRowsPerBlock - 1) / kRowsPerBlock);
  if (packs) {
    constexpr auto forward = layernorm_forward_kernel<kPack, T, kNorm>;
    MPIASR_LAUNCH(forward, blocks, kThreads, 0, stream, args);
  } else {
    constexpr auto forward = layernorm_forward_kernel<1, T, kNorm>;
    MPIASR_LAUNCH(forward, blocks, kThreads, 0, stream, args);
  }
}

template <typename T, bool kSwish>
void launch_backward(const BackwardArgs& args, bool accumulate, float* dweight, float* dbias,
                     float* partials, cudaStream_t stream) {
  if (args.N <= 0 || args.C <= 0) return;
  const bool packs =
      rows_packed(args.C, {args.dinp, args.dout, args.inp, args.normed, args.weight});
  if (args.dinp) {
    const unsigned blocks = unsigned((args.N + kRowsPerBlock - 1) / kRowsPerBlock);
    if (packs) {
      constexpr auto input = layernorm_backward_input_kernel<kPack, T, kSwish>;
      MPIASR_LAUNCH(input, blocks, kThreads, 0, stream, args, accumulate);
    } else {
      constexpr auto input = layernorm_backward_input_kernel<1, T, kSwish>;
      MPIASR_LAUNCH(input, blocks, kThreads, 0, stream, args, accumulate);
    }
  }
  if (!dweight && !dbias) return;
  const int chunks = column_chunks(args.N);
  const int rows_per_chunk = (args.N + chunks - 1) / chunks;
  float* partials_w = partials;
  float* partials_b = partials + size_t(chunks) * args.C;
  const int width = packs ? kPack : 1;
  const int column_groups = (args.C + width - 1) / width;
  // An even number of groups a block: whole warps.
  const int block_groups = std::min(kParamColumnThreads, (column_groups + 1) / 2 * 2);
  const dim3 grid(unsigned((column_groups + block_groups - 1) / block_groups), unsigned(chunks));
  const int threads = block_groups * kParamLanes;
  if (packs) {
    constexpr auto params = layernorm_param_partials_kernel<kPack, T, kSwish>;
    MPIASR_LAUNCH(params, grid, threads, 0, stream, args, partials_w, partials_b, rows_per_chunk);
  } else {
    constexpr auto params = layernorm_param_partials_kernel<1, T, kSwish>;
    MPIASR_LAUNCH(params, grid, threads, 0, stream, args, partials_w, partials_b, rows_per_chunk);
  }
  if (dweight) cuda_add_partials(dweight, partials_w, chunks, args.C, stream);
  if (dbias) cuda_add_partials(dbias, partials_b, chunks, args.C, stream);
}

}  // namespace
}  // namespace cuda_kernels

using namespace cuda_kernels;

template <typename T>
void cuda_layernorm_forward(T* out, float* mean, float* rstd, const T* inp, const T* weight,
                            const T* bias, int N, int C, float eps, cudaStream_t stream) {
  const ForwardArgs args{out,  nullptr,       mean, rstd, inp, nullptr, weight,
                         bias, DropoutSite{}, 1.0f, N,    C,   eps};
  launch_forward<T, Norm::kPlain>(args, rows_packed(C, {out, inp, weight, bias}), stream);
}

template <typename T>
void cuda_residual_layernorm_forward(T* x, T* out, float* mean, float* rstd, const T* base,
                                     const T* branch, float scale, float p, const uint64_t* seed,
                                     uint64_t offset, const T* weight, const T* bias, int N, int C,
                                     float eps, cudaStream_t stream) {
  MPIASR_CHECK(p >= 0.0f && p <= 1.0f, "dropout probability " << p << " is outside [0, 1]");
  const DropoutSite site = dropout_site(p, seed, offset);
  const ForwardArgs args{out, x, mean, rstd, base, branch, weight, bias, site, scale, N, C, eps};
  const bool packs = rows_packed(C, {x, out, base, branch, weight, bias}) && packed(site);
  launch_forward<T, Norm::kResidual>(args, packs, stream);
}

template <typename T>
void cuda_layernorm_swish_forward(T* normed, T* out, float* mean, float* rstd, const T* inp,
                                  const T* weight, const T* bias, int N, int C, float eps,
                                  cudaStream_t stream) {
  const ForwardArgs args{normed, out,           mean, rstd, inp, nullptr, weight,
                         bias,   DropoutSite{}, 1.0f, N,    C,   eps};
  launch_forward<T, Norm::kSwish>(args, rows_packed(C, {normed, out, inp, weight, bias}), stream);
}

template <typename T>
void cuda_layernorm_backward(T* dinp, float* dweight, float* dbias, const T* dout, const T* inp,
                             const T* weight, const float* mean, const float* rstd, int N, int C,
                             bool accumulate, float* partials, cudaStream_t stream) {
  const BackwardArgs args{dinp, dout, inp, nullptr, weight, mean, rstd, N, C};
  launch_backward<T, false>(args, accumulate, dweight, dbias, partials, stream);
}

template <typename T>
void cuda_layernorm_swish_backward(T* dinp, float* dweight, float* dbias, const T* dout,
                                   const T* inp, const T* normed, const T* weight,
                                   const float* mean, const float* rstd, int N, int C,
                                   float* partials, cudaStream_t stream) {
  const BackwardArgs args{dinp, dout, inp, normed, weight, mean, rstd, N, C};
  launch_backward<T, true>(args, false, dweight, dbias, partials, stream);
}

#define MPIASR_INSTANTIATE(T)                                                                      \
  template void cuda_layernorm_forward<T>(T*, float*, float*, const T*, const T*, const T*, int,   \
                                          int, float, cudaStream_t);                               \
  template void cuda_residual_layernorm_forward<T>(                                                \
      T*, T*, float*, float*, const T*, const T*, float, float, const uint64_t*, uint64_t,         \
      const T*, const T*, int, int, float, cudaStream_t);                                          \
  template void cuda_layernorm_swish_forward<T>(T*, T*, float*, float*, const T*, const T*,        \
                                                const T*, int, int, float, cudaStream_t);          \
  template void cuda_layernorm_backward<T>(T*, float*, float*, const T*, const T*, const T*,       \
                                           const float*, const float*, int, int, bool, float*,     \
                                           cudaStream_t);                                          \
  template void cuda_layernorm_swish_backward<T>(T*, float*, float*, const T*, const T*, const T*, \
                                                 const T*, const float*, const float*, int, int,   \
                                                 float*, cudaStream_t);
MPIASR_INSTANTIATE(__half)
MPIASR_INSTANTIATE(__nv_bfloat16)
#undef MPIASR_INSTANTIATE

}  // namespace mpiasr
