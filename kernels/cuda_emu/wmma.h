// Warp matrix multiply-accumulate (nvcuda::wmma of <mma.h>) on the CPU, for
// the emulation build (kernels/cuda_emu/include/mma.h includes this): the
// 16x16x16 shape with __half or __nv_bfloat16 inputs and float accumulators,
// as kernels/cuda uses it.
//
// How fragments are kept: CUDA leaves the mapping of a fragment's elements to
// lanes unspecified, so correct code touches them only all together (load,
// store, fill, mma, or a loop over x[0, num_elements)). Here a fragment has
// room for the whole tile (num_elements = 256, element (r, c) at x[16 r + c])
// and each lane keeps the part it needs: of an accumulator the elements
// i = lane, lane + 32, ... (rows of the lane's parity, column lane % 16), of
// matrix A those rows, of matrix B that column; the rest read as NaN. So
// every lane computes 8 of the 256 dot products of an mma, and code that
// respects the contract gets the same result as on a GPU.
//
// What is checked, as the CUDA documentation requires: every *_sync call is a
// warp collective of all 32 lanes, meeting lanes in the same call (divergent
// or partial calls fail like a misused shuffle); pointers are 256-bit aligned
// and ldm is a multiple of 16 bytes. Loads read memory as the calling lane
// finds it (before the lanes meet) and stores write after they meet, each
// lane its own elements, so a missing __syncwarp / __syncthreads between a
// store and a load of other lanes' data reads what no one wrote, as plain
// loads do. mma_sync sums the 16 products of a dot in float, in k order (a
// tensor core's internal order and precision differ in the last bits).
#pragma once

#include <cstddef>
#include <cstdint>
#include <source_location>
#include <type_traits>

#include "kernels/cuda_emu/simt.h"

namespace nvcuda::wmma {

struct matrix_a {};
struct matrix_b {};
struct accumulator {};
struct row_major {};
struct col_major {};
enum layout_t { mem_row_major, mem_col_major };

template <typename Use, int M, int N, int K, typename T, typename Layout = void>
class fragment {
  static_assert(M == 16 && N == 16 && K == 16, "the emulator has the m16n16k16 shape only");
  static_assert(std::is_same_v<Use, accumulator>
                    ? std::is_same_v<T, float> && std::is_void_v<Layout>
                    : (std::is_same_v<T, __half> ||
                       std::is_same_v<T, __nv_bfloat16>)&&(std::is_same_v<Layout, row_major> ||
                                                           std::is_same_v<Layout, col_major>),
                "inputs are __half or __nv_bfloat16 with a layout, accumulators float without");

 public:
  using element_type = T;
  static constexpr int num_elements = 256;
  T x[num_elements];  // element (r, c) of the tile at x[16 r + c]
};

namespace detail {

inline void meet(const char* name, const std::source_location& where) {
  mpiasr::emu::detail::warp_collective(mpiasr::emu::detail::WarpOp::kWmma, 0xffffffffu, 0, 0,
                                       warpSize, name, where);
}

inline void check_pointer(const void* p, unsigned ldm, size_t element_bytes,
                          const std::source_location& where) {
  mpiasr::emu::detail::require(reinterpret_cast<uintptr_t>(p) % 32 == 0,
                               "wmma: the pointer is not 256-bit aligned", where);
  mpiasr::emu::detail::require(size_t(ldm) * element_bytes % 16 == 0,
                               "wmma: ldm is not a multiple of 16 bytes", where);
}

// The calling thread's lane in its warp.
inline int lane() {
  const unsigned linear = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  return int(linear % 32);
}

// Offset of element (r, c) of a 16 x 16 tile stored with leading dimension ldm.
inline size_t offset(int r, int c, unsigned ldm, bool row_major_storage) {
  return row_major_storage ? size_t(r) * ldm + size_t(c) : size_t(c) * ldm + size_t(r);
}

}  // namespace detail

template <typename Use, typename T, typename Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, T value) {
  for (T& e : f.x) e = value;
}

// Whether the calling lane keeps element (r, c) of a fragment for `Use`.
template <typename Use>
bool kept(int r, int c) {
  const int lane = detail::lane();
  const bool row = r % 2 == lane / 16, column = c == lane % 16;
  if constexpr (std::is_same_v<Use, matrix_a>) return row;
  if constexpr (std::is_same_v<Use, matrix_b>) return column;
  return row && column;
}

template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* p, unsigned ldm,
                      std::source_location where = std::source_location::current()) {
  static_assert(!std::is_same_v<Use, accumulator>, "an accumulator load takes a layout_t");
  detail::check_pointer(p, ldm, sizeof(T), where);
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 16; ++c) {
      f.x[16 * r + c] = kept<Use>(r, c)
                            ? p[detail::offset(r, c, ldm, std::is_same_v<Layout, row_major>)]
                            : T(NAN);
    }
  }
  detail::meet("wmma::load_matrix_sync", where);
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p,
                             unsigned ldm, layout_t layout,
                             std::source_location where = std::source_location::current()) {
  detail::check_pointer(p, ldm, sizeof(float), where);
  for (int r = 0; r < 16; ++r) {
    for (int c = 0; c < 16; ++c) {
      f.x[16 * r + c] =
          kept<accumulator>(r, c) ? p[detail::offset(r, c, ldm, layout == mem_row_major)] : NAN;
    }
  }
  detail::meet("wmma::load_matrix_sync", where);
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f,
                              unsigned ldm, layout_t layout,
                              std::source_location where = std::source_location::current()) {
  detail::check_pointer(p, ldm, sizeof(float), where);
  detail::meet("wmma::store_matrix_sync", where);
  for (int i = detail::lane(); i < 256; i += 32) {
    p[detail::offset(i / 16, i % 16, ldm, layout == mem_row_major)] = f.x[i];
  }
}

template <typename T, typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
              const fragment<matrix_a, 16, 16, 16, T, LayoutA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LayoutB>& b,
              const fragment<accumulator, 16, 16, 16, float>& c,
              std::source_location where = std::source_location::current()) {
  detail::meet("wmma::mma_sync", where);
  for (int i = detail::lane(); i < 256; i += 32) {
    const int r = i / 16, col = i % 16;
    float sum = c.x[i];
    for (int k = 0; k < 16; ++k) sum += float(a.x[16 * r + k]) * float(b.x[16 * k + col]);
    d.x[i] = sum;
  }
}

}  // namespace nvcuda::wmma
