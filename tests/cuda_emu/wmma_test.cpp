// The emulator's warp matrix multiply-accumulate (kernels/cuda_emu/wmma.h):
// D = A B + C of 16x16 tiles in every layout, for fp16 and bf16 inputs,
// under three schedule seeds, against the product computed here in double
// (exact for 16-bit inputs; the float sums of 16 products differ from it in
// the last bits); elementwise loops over a fragment; fragments of CUDA's
// sizes for sm_80 and sm_90, each lane holding its own elements of the tile
// (every one held by one lane, or two for fp16 inputs) at places that change
// from launch to launch; and the misuse it must report: misaligned pointers,
// leading dimensions that are not whole 16-byte units, calls that only part of
// the warp makes or that meet another wmma call, and a tile read from shared
// memory without the __syncwarp after other lanes wrote it.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>
#include <mma.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cuda/launch.h"
#include "kernels/cuda_emu/simt.h"
#include "src/base/error.h"
#include "tests/cuda_emu/launch_error.h"

namespace mpiasr {
namespace {

using emu_test::launch_error;

namespace wmma = nvcuda::wmma;
using Accumulator = wmma::fragment<wmma::accumulator, 16, 16, 16, float>;

template <typename T>
T* device_copy(const std::vector<T>& host) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, host.size() * sizeof(T) + 64), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return static_cast<T*>(p);
}

template <typename T>
std::vector<T> host_copy(const T* device, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  return host;
}

// d (ld 16, `d_layout`) = a b + c, with a and b read in their layouts (ld 16)
// and c (ld 16) in `c_layout`; then doubled through the fragment's elements
// when `twice`.
template <typename T, typename LayoutA, typename LayoutB>
__global__ void product_kernel(float* d, const T* a, const T* b, const float* c,
                               wmma::layout_t c_layout, wmma::layout_t d_layout, bool twice) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, T, LayoutA> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, T, LayoutB> fb;
  Accumulator acc;
  wmma::load_matrix_sync(fa, a, 16);
  wmma::load_matrix_sync(fb, b, 16);
  wmma::load_matrix_sync(acc, c, 16, c_layout);
  wmma::mma_sync(acc, fa, fb, acc);
  if (twice) {
    for (int i = 0; i < acc.num_elements; ++i) acc.x[i] *= 2.0f;
  }
  wmma::store_matrix_sync(d, acc, 16, d_layout);
}

// Element (r, c) of a 16 x 16 tile stored in a layout with ld 16.
size_t at(int r, int c, bool row_major) {
  return row_major ? size_t(r) * 16 + c : size_t(c) * 16 + r;
}

template <typename T>
void check_products() {
  std::mt19937 random(5);
  std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
  std::vector<T> a(256), b(256);
  std::vector<float> c(256);
  for (int i = 0; i < 256; ++i) {
    a[i] = T(uniform(random));
    b[i] = T(uniform(random));
    c[i] = uniform(random);
  }
  T* da = device_copy(a);
  T* db = device_copy(b);
  float* dc = device_copy(c);
  float* dd = device_copy(std::vector<float>(256, 0.0f));
  for (bool a_rows : {true, false}) {
    for (bool b_rows : {true, false}) {
      for (bool c_rows : {true, false}) {
        for (bool twice : {false, true}) {
          const wmma::layout_t c_layout = c_rows ? wmma::mem_row_major : wmma::mem_col_major;
          const wmma::layout_t d_layout = c_rows ? wmma::mem_col_major : wmma::mem_row_major;
          auto run = [&](auto layout_a, auto layout_b) {
            constexpr auto kernel = product_kernel<T, decltype(layout_a), decltype(layout_b)>;
            MPIASR_LAUNCH(kernel, 1, 32, 0, nullptr, dd, da, db, dc, c_layout, d_layout, twice);
          };
          if (a_rows && b_rows) run(wmma::row_major{}, wmma::row_major{});
          if (a_rows && !b_rows) run(wmma::row_major{}, wmma::col_major{});
          if (!a_rows && b_rows) run(wmma::col_major{}, wmma::row_major{});
          if (!a_rows && !b_rows) run(wmma::col_major{}, wmma::col_major{});
          const std::vector<float> d = host_copy(dd, 256);
          for (int r = 0; r < 16; ++r) {
            for (int col = 0; col < 16; ++col) {
              double sum = c[at(r, col, c_rows)];
              for (int k = 0; k < 16; ++k) {
                sum += double(float(a[at(r, k, a_rows)])) * double(float(b[at(k, col, b_rows)]));
              }
              if (twice) sum *= 2;
              ASSERT_NEAR(d[at(r, col, !c_rows)], sum, 1e-5 * (1 + std::abs(sum)))
                  << "a rows " << a_rows << ", b rows " << b_rows << ", c rows " << c_rows
                  << ", element (" << r << ", " << col << ")";
            }
          }
        }
      }
    }
  }
  for (void* p : {static_cast<void*>(da), static_cast<void*>(db), static_cast<void*>(dc),
                  static_cast<void*>(dd)}) {
    EXPECT_EQ(cudaFree(p), cudaSuccess);
  }
}

TEST(Wmma, ProductsInEveryLayoutMatchTheDefinition) {
  const uint64_t seed = emu::schedule_seed();
  for (uint64_t s : {0, 1, 77}) {
    SCOPED_TRACE("schedule seed " + std::to_string(s));
    emu::set_schedule_seed(s);
    check_products<__half>();
    check_products<__nv_bfloat16>();
  }
  emu::set_schedule_seed(seed);
}

// CUDA's <mma.h> for sm_80 and sm_90: per lane, 8 floats of an accumulator,
// 16 __half or 8 __nv_bfloat16 of an input tile.
TEST(Wmma, FragmentsHoldCudasElementsPerLane) {
  EXPECT_EQ(Accumulator::num_elements, 8);
  EXPECT_EQ((wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major>::num_elements),
            16);
  EXPECT_EQ((wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major>::num_elements),
            16);
  EXPECT_EQ(
      (wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::col_major>::num_elements),
      8);
  EXPECT_EQ(
      (wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major>::num_elements),
      8);
}

// Each lane's elements of a tile whose element (r, c) is 16 r + c, loaded as
// `Fragment` (an input from `tile`, an accumulator from `acc_tile`), copied
// out by position: held[lane num_elements + i] = x[i].
template <typename Fragment, typename T>
__global__ void held_elements_kernel(float* held, const T* tile, const float* acc_tile) {
  Fragment f;
  if constexpr (std::is_same_v<Fragment, Accumulator>) {
    wmma::load_matrix_sync(f, acc_tile, 16, wmma::mem_row_major);
  } else {
    wmma::load_matrix_sync(f, tile, 16);
  }
  const int lane = int(threadIdx.x);
  for (int i = 0; i < f.num_elements; ++i) held[lane * f.num_elements + i] = float(f.x[i]);
}

// Every element of the tile is held by `copies` lanes, and the places differ
// between two launches.
template <typename Fragment, typename T>
void check_held_elements(int copies) {
  std::vector<T> tile(256);
  std::vector<float> acc_tile(256);
  for (int e = 0; e < 256; ++e) {
    tile[e] = T(float(e));
    acc_tile[e] = float(e);
  }
  T* d_tile = device_copy(tile);
  float* d_acc_tile = device_copy(acc_tile);
  const size_t n = size_t(32) * Fragment::num_elements;
  float* d_held = device_copy(std::vector<float>(n, -1.0f));
  std::vector<std::vector<float>> launches;
  for (int launch = 0; launch < 2; ++launch) {
    constexpr auto kernel = held_elements_kernel<Fragment, T>;
    MPIASR_LAUNCH(kernel, 1, 32, 0, nullptr, d_held, d_tile, d_acc_tile);
    launches.push_back(host_copy(d_held, n));
    std::vector<int> count(256, 0);
    for (float e : launches.back()) {
      ASSERT_TRUE(e >= 0.0f && e < 256.0f && e == std::floor(e)) << e;
      ++count[size_t(e)];
    }
    EXPECT_EQ(count, std::vector<int>(256, copies)) << "launch " << launch;
  }
  EXPECT_NE(launches[0], launches[1]);
  for (void* p :
       {static_cast<void*>(d_tile), static_cast<void*>(d_acc_tile), static_cast<void*>(d_held)}) {
    EXPECT_EQ(cudaFree(p), cudaSuccess);
  }
}

TEST(Wmma, EachLaneHoldsItsOwnElementsAtPlacesDrawnPerLaunch) {
  check_held_elements<Accumulator, __half>(1);
  check_held_elements<wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major>, __half>(
      2);
  check_held_elements<wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major>, __half>(
      2);
  check_held_elements<wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::col_major>,
                      __nv_bfloat16>(1);
  check_held_elements<wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major>,
                      __nv_bfloat16>(1);
}

// ---- misuse --------------------------------------------------------------------

__global__ void misaligned_kernel(float* d, const __half* a) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::load_matrix_sync(fa, a + 8, 16);  // 16 bytes in
  (void)d;
}

__global__ void odd_ldm_kernel(float* d, const __half* a) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::load_matrix_sync(fa, a, 20);  // 40 bytes
  (void)d;
}

// Only lanes 0..15 reach the mma.
__global__ void half_warp_kernel(float* d, const __half* a) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
  Accumulator acc;
  wmma::fill_fragment(fa, __half(1.0f));
  wmma::fill_fragment(fb, __half(1.0f));
  wmma::fill_fragment(acc, 0.0f);
  if (threadIdx.x < 16) wmma::mma_sync(acc, fa, fb, acc);
  (void)d;
  (void)a;
}

// Half the warp loads while the other half multiplies.
__global__ void mixed_calls_kernel(float* d, const __half* a) {
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
  Accumulator acc;
  wmma::fill_fragment(fa, __half(1.0f));
  wmma::fill_fragment(fb, __half(1.0f));
  wmma::fill_fragment(acc, 0.0f);
  if (threadIdx.x < 16) {
    wmma::load_matrix_sync(fa, a, 16);
  } else {
    wmma::mma_sync(acc, fa, fb, acc);
  }
  (void)d;
}

TEST(WmmaErrors, MisuseFailsNamingTheCall) {
  float* d = device_copy(std::vector<float>(256, 0.0f));
  __half* a = device_copy(std::vector<__half>(512, __half(1.0f)));
  struct Case {
    std::string kernel;
    std::string error;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"misaligned_kernel",
       launch_error([&] { MPIASR_LAUNCH(misaligned_kernel, 1, 32, 0, nullptr, d, a); }),
       "wmma: the pointer is not 256-bit aligned"},
      {"odd_ldm_kernel",
       launch_error([&] { MPIASR_LAUNCH(odd_ldm_kernel, 1, 32, 0, nullptr, d, a); }),
       "wmma: ldm is not a multiple of 16 bytes"},
      {"half_warp_kernel",
       launch_error([&] { MPIASR_LAUNCH(half_warp_kernel, 1, 32, 0, nullptr, d, a); }),
       "wmma::mma_sync"},
      {"mixed_calls_kernel",
       launch_error([&] { MPIASR_LAUNCH(mixed_calls_kernel, 1, 32, 0, nullptr, d, a); }),
       "meets lanes"},
  };
  for (const Case& c : cases) {
    EXPECT_NE(c.error.find("launch of kernel " + c.kernel + " failed"), std::string::npos)
        << c.error;
    EXPECT_NE(c.error.find(c.expected), std::string::npos) << c.kernel << ": " << c.error;
    EXPECT_NE(c.error.find("wmma_test.cpp:"), std::string::npos) << c.error;
  }
  EXPECT_EQ(cudaFree(d), cudaSuccess);
  EXPECT_EQ(cudaFree(a), cudaSuccess);
}

// Each lane writes the tile elements i = lane, lane + 32, ... of shared memory
// (1 each), then the warp multiplies the tile by ones: every element of the
// product is 16. Without the __syncwarp a lane loads elements other lanes
// have not written yet.
template <bool kSyncWarp>
__global__ void shared_tile_kernel(float* d) {
  struct alignas(32) Tile {
    __half x[256];
  };
  MPIASR_SHARED(Tile, tile);
  for (int i = int(threadIdx.x); i < 256; i += 32) tile.x[i] = __half(1.0f);
  if (kSyncWarp) __syncwarp();
  wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> fa;
  wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> fb;
  Accumulator acc;
  wmma::load_matrix_sync(fa, tile.x, 16);
  wmma::fill_fragment(fb, __half(1.0f));
  wmma::fill_fragment(acc, 0.0f);
  wmma::mma_sync(acc, fa, fb, acc);
  wmma::store_matrix_sync(d, acc, 16, wmma::mem_row_major);
}

TEST(Wmma, TheMissingSyncwarpBeforeALoadIsExposed) {
  float* d = device_copy(std::vector<float>(256, 0.0f));
  MPIASR_LAUNCH(shared_tile_kernel<true>, 1, 32, 0, nullptr, d);
  EXPECT_EQ(host_copy(d, 256), std::vector<float>(256, 16.0f));
  MPIASR_LAUNCH(shared_tile_kernel<false>, 1, 32, 0, nullptr, d);
  int wrong = 0;
  for (float x : host_copy(d, 256)) wrong += x != 16.0f;
  EXPECT_GT(wrong, 0);
  EXPECT_EQ(cudaFree(d), cudaSuccess);
}

}  // namespace
}  // namespace mpiasr
