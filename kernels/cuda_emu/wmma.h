// Warp matrix multiply-accumulate (nvcuda::wmma of <mma.h>) on the CPU, for
// the emulation build (kernels/cuda_emu/include/mma.h includes this): the
// 16x16x16 shape with __half or __nv_bfloat16 inputs and float accumulators,
// as kernels/cuda uses it.
//
// How fragments are kept: as on sm_80 and sm_90, each lane holds
// num_elements of the tile's 256 elements, as many as CUDA's <mma.h> gives
// there: an accumulator 8 floats, a matrix_a or matrix_b fragment 16 __half
// (each element held by two lanes) or 8 __nv_bfloat16. CUDA leaves unspecified
// which element of the tile a lane's x[i] is, so correct code touches x[] only
// all together (load, store, fill, mma, or the same operation on every x[i]).
// Here that map is drawn at random for every launch and kind of fragment
// (from MPIASR_EMU_SEED and the launch's number), so code that takes x[i] for
// a given element of the tile (a row, a column) computes a wrong result.
//
// What is checked, as the CUDA documentation requires: every *_sync call is a
// warp collective of all 32 lanes, meeting lanes in the same call (divergent
// or partial calls fail like a misused shuffle); pointers are 256-bit aligned
// and ldm is a multiple of 16 bytes. Loads read memory as the calling lane
// finds it (before the lanes meet) and stores write after they meet, each
// lane its own elements, so a missing __syncwarp / __syncthreads between a
// store and a load of other lanes' data reads what no one wrote, as plain
// loads do. mma_sync: every lane leaves the addresses of its fragments, and
// the first lane of the warp to resume after they meet gathers the three
// tiles from all 32 lanes, computes D = A B + C and writes every lane's part
// of D; a dot's 16 products are summed in float, in k order (a tensor core's
// internal order and precision differ in the last bits).
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <random>
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

namespace detail {
// Elements per lane of a fragment, as CUDA's <mma.h> has them for sm_80 and sm_90.
template <typename Use, typename T>
constexpr int kLaneElements =
    std::is_same_v<Use, accumulator> || std::is_same_v<T, __nv_bfloat16> ? 8 : 16;
}  // namespace detail

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
  static constexpr int num_elements = detail::kLaneElements<Use, T>;
  T x[num_elements];  // which elements of the tile: detail::lane_map
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

// The calling thread's index in its block, and its lane in its warp.
inline int thread_in_block() {
  return int(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z));
}
inline int lane() {
  return thread_in_block() % 32;
}

// Offset of element (r, c) of a 16 x 16 tile stored with leading dimension ldm.
inline size_t offset(int r, int c, unsigned ldm, bool row_major_storage) {
  return row_major_storage ? size_t(r) * ldm + size_t(c) : size_t(c) * ldm + size_t(r);
}

// Which element of the tile (16 r + c) lane l's x[i] is: elements[l][i].
template <int PerLane>
struct LaneMap {
  uint64_t launch = 0;  // the launch it was drawn for
  uint8_t elements[32][PerLane];
};

// The map of the fragments for `Use` of T in the running launch: every
// element of the tile held by 32 PerLane / 256 lanes, at places drawn from
// the schedule seed, the launch's number and the kind of fragment.
template <typename Use, typename T>
const LaneMap<kLaneElements<Use, T>>& lane_map() {
  constexpr int kPerLane = kLaneElements<Use, T>;
  thread_local LaneMap<kPerLane> map;
  const uint64_t launch = mpiasr::emu::detail::launch_number();
  if (map.launch != launch) {
    map.launch = launch;
    uint8_t* places = &map.elements[0][0];
    for (int i = 0; i < 32 * kPerLane; ++i) places[i] = uint8_t(i % 256);
    const uint64_t seed = mpiasr::emu::schedule_seed();
    const uint64_t kind = std::is_same_v<Use, matrix_a> ? 1 : std::is_same_v<Use, matrix_b> ? 2 : 3;
    std::seed_seq sequence{seed & 0xffffffffu, seed >> 32, launch & 0xffffffffu,
                           launch >> 32,       kind,       uint64_t(kPerLane)};
    std::mt19937 random(sequence);
    std::shuffle(places, places + 32 * kPerLane, random);
  }
  return map;
}

// A lane's operands of an mma_sync, for the lane that computes the warp's
// product: the fragments of A and B, C's and D's elements, and whether its
// part of D has been written.
struct MmaLane {
  const void* a;
  const void* b;
  const float* c;
  float* d;
  bool* done;
};
// By thread of the running block: a block's threads all run on one OS thread.
inline thread_local MmaLane mma_lanes[1024];

}  // namespace detail

template <typename Use, typename T, typename Layout>
void fill_fragment(fragment<Use, 16, 16, 16, T, Layout>& f, T value) {
  for (T& e : f.x) e = value;
}

template <typename Use, typename T, typename Layout>
void load_matrix_sync(fragment<Use, 16, 16, 16, T, Layout>& f, const T* p, unsigned ldm,
                      std::source_location where = std::source_location::current()) {
  static_assert(!std::is_same_v<Use, accumulator>, "an accumulator load takes a layout_t");
  detail::check_pointer(p, ldm, sizeof(T), where);
  const auto& map = detail::lane_map<Use, T>();
  const int lane = detail::lane();
  for (int i = 0; i < f.num_elements; ++i) {
    const int e = map.elements[lane][i];
    f.x[i] = p[detail::offset(e / 16, e % 16, ldm, std::is_same_v<Layout, row_major>)];
  }
  detail::meet("wmma::load_matrix_sync", where);
}

inline void load_matrix_sync(fragment<accumulator, 16, 16, 16, float>& f, const float* p,
                             unsigned ldm, layout_t layout,
                             std::source_location where = std::source_location::current()) {
  detail::check_pointer(p, ldm, sizeof(float), where);
  const auto& map = detail::lane_map<accumulator, float>();
  const int lane = detail::lane();
  for (int i = 0; i < f.num_elements; ++i) {
    const int e = map.elements[lane][i];
    f.x[i] = p[detail::offset(e / 16, e % 16, ldm, layout == mem_row_major)];
  }
  detail::meet("wmma::load_matrix_sync", where);
}

inline void store_matrix_sync(float* p, const fragment<accumulator, 16, 16, 16, float>& f,
                              unsigned ldm, layout_t layout,
                              std::source_location where = std::source_location::current()) {
  detail::check_pointer(p, ldm, sizeof(float), where);
  detail::meet("wmma::store_matrix_sync", where);
  const auto& map = detail::lane_map<accumulator, float>();
  const int lane = detail::lane();
  for (int i = 0; i < f.num_elements; ++i) {
    const int e = map.elements[lane][i];
    p[detail::offset(e / 16, e % 16, ldm, layout == mem_row_major)] = f.x[i];
  }
}

template <typename T, typename LayoutA, typename LayoutB>
void mma_sync(fragment<accumulator, 16, 16, 16, float>& d,
              const fragment<matrix_a, 16, 16, 16, T, LayoutA>& a,
              const fragment<matrix_b, 16, 16, 16, T, LayoutB>& b,
              const fragment<accumulator, 16, 16, 16, float>& c,
              std::source_location where = std::source_location::current()) {
  using FragmentA = fragment<matrix_a, 16, 16, 16, T, LayoutA>;
  using FragmentB = fragment<matrix_b, 16, 16, 16, T, LayoutB>;
  bool done = false;
  const int thread = detail::thread_in_block();
  detail::mma_lanes[thread] = {&a, &b, c.x, d.x, &done};
  detail::meet("wmma::mma_sync", where);
  if (done) return;
  // The first lane to resume: the tiles from every lane (all C before any D,
  // which may be the same fragment), then every lane's part of D.
  const detail::MmaLane* lanes = detail::mma_lanes + (thread - thread % 32);
  const auto& map_a = detail::lane_map<matrix_a, T>();
  const auto& map_b = detail::lane_map<matrix_b, T>();
  const auto& map_c = detail::lane_map<accumulator, float>();
  float ta[256], tb[256], tc[256];
  for (int lane = 0; lane < 32; ++lane) {
    const FragmentA& fa = *static_cast<const FragmentA*>(lanes[lane].a);
    const FragmentB& fb = *static_cast<const FragmentB*>(lanes[lane].b);
    for (int i = 0; i < fa.num_elements; ++i) ta[map_a.elements[lane][i]] = float(fa.x[i]);
    for (int i = 0; i < fb.num_elements; ++i) tb[map_b.elements[lane][i]] = float(fb.x[i]);
    for (int i = 0; i < c.num_elements; ++i) tc[map_c.elements[lane][i]] = lanes[lane].c[i];
  }
  for (int lane = 0; lane < 32; ++lane) {
    for (int i = 0; i < d.num_elements; ++i) {
      const int e = map_c.elements[lane][i], r = e / 16, col = e % 16;
      float sum = tc[e];
      for (int k = 0; k < 16; ++k) sum += ta[16 * r + k] * tb[16 * k + col];
      lanes[lane].d[i] = sum;
    }
    *lanes[lane].done = true;
  }
}

}  // namespace nvcuda::wmma
