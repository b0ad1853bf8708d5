// The SIMT emulator (kernels/cuda_emu/simt.h) on small kernels of its own,
// against results computed on the host from CUDA's definitions: built-in
// indices, barriers with static and dynamic shared memory, shuffles and votes
// with masks and widths, atomics across blocks, the errors it must raise
// instead of hanging, what each schedule exposes of a missing barrier, and
// AddressSanitizer reports from inside a fiber.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/cuda/launch.h"
#include "src/base/error.h"
#include "tests/cuda_emu/launch_error.h"

namespace mpiasr {
namespace {

using emu_test::launch_error;

using emu::Schedule;

// n elements of T from cudaMalloc, freed with the object.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(size_t n, const std::vector<T>& init = {}) : n_(n) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&ptr_), n * sizeof(T)), cudaSuccess);
    if (!init.empty()) {
      EXPECT_EQ(cudaMemcpy(ptr_, init.data(), n * sizeof(T), cudaMemcpyHostToDevice), cudaSuccess);
    } else {
      EXPECT_EQ(cudaMemset(ptr_, 0, n * sizeof(T)), cudaSuccess);
    }
  }
  ~DeviceBuffer() { cudaFree(ptr_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  T* get() const { return ptr_; }
  std::vector<T> host() const {
    std::vector<T> out(n_);
    EXPECT_EQ(cudaMemcpy(out.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
    return out;
  }

 private:
  size_t n_;
  T* ptr_ = nullptr;
};

// Restores the default schedule after a test that changes it.
class ScheduleGuard {
 public:
  explicit ScheduleGuard(Schedule schedule) { emu::set_schedule(schedule); }
  ~ScheduleGuard() { emu::set_schedule(Schedule::kShuffled); }
};

// ---- kernels ----------------------------------------------------------------

__global__ void coordinates_kernel(uint32_t* out) {
  const unsigned block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
  const unsigned thread = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  const unsigned threads = blockDim.x * blockDim.y * blockDim.z;
  const unsigned i = block * threads + thread;
  out[4 * i + 0] = threadIdx.x | threadIdx.y << 10 | threadIdx.z << 20;
  out[4 * i + 1] = blockIdx.x | blockIdx.y << 10 | blockIdx.z << 20;
  out[4 * i + 2] = blockDim.x | blockDim.y << 10 | blockDim.z << 20;
  out[4 * i + 3] = gridDim.x | gridDim.y << 10 | gridDim.z << 20;
}

// out = in reversed within each block of 256, through shared memory; without
// the barrier a thread may read its mirror's slot before the mirror wrote it.
template <bool kBarrier>
__global__ void reverse_kernel(int* out, const int* in) {
  MPIASR_SHARED(int[256], slots);
  const int t = threadIdx.x, base = blockIdx.x * 256;
  slots[t] = in[base + t];
  if (kBarrier) __syncthreads();
  out[base + t] = slots[255 - t];
}

// Tree sum of each block's values in dynamic shared memory (blockDim.x a power of two).
__global__ void tree_sum_kernel(double* sums, const double* in) {
  MPIASR_DYNAMIC_SHARED(double, partial);
  const unsigned t = threadIdx.x;
  partial[t] = in[blockIdx.x * blockDim.x + t];
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half) partial[t] += partial[t + half];
    __syncthreads();
  }
  if (t == 0) sums[blockIdx.x] = partial[0];
}

// Each thread records every shuffle of its value t * 10 (and of a double and a half).
__global__ void shuffle_kernel(int* out, int argument, int width) {
  const int t = threadIdx.x;
  int* row = out + 6 * t;
  row[0] = __shfl_sync(0xffffffffu, t * 10, argument, width);
  row[1] = __shfl_up_sync(0xffffffffu, t * 10, unsigned(argument), width);
  row[2] = __shfl_down_sync(0xffffffffu, t * 10, unsigned(argument), width);
  row[3] = __shfl_xor_sync(0xffffffffu, t * 10, argument, width);
  row[4] = int(__shfl_xor_sync(0xffffffffu, double(t) + 0.5, argument, width) * 2.0);
  row[5] = int(float(__shfl_down_sync(0xffffffffu, __half(float(t)), unsigned(argument), width)));
}

// The two half-warps exchange within themselves with their own masks.
__global__ void half_warp_kernel(int* out) {
  const int lane = threadIdx.x % 32;
  const unsigned mask = lane < 16 ? 0x0000ffffu : 0xffff0000u;
  int value = lane;
  for (int offset = 8; offset > 0; offset /= 2) value += __shfl_xor_sync(mask, value, offset);
  out[threadIdx.x] = value;
}

// Lanes at or above `live` exit first; the others vote and sync.
__global__ void vote_kernel(unsigned* out, int live) {
  const int lane = threadIdx.x % 32;
  if (lane >= live) return;
  const unsigned mask = (live == 32) ? 0xffffffffu : (1u << live) - 1;
  const unsigned odd = __ballot_sync(mask, lane % 2);
  const int any_big = __any_sync(mask, lane > 20);
  const int all_small = __all_sync(mask, lane < 20);
  __syncwarp(mask);
  out[3 * threadIdx.x + 0] = odd;
  out[3 * threadIdx.x + 1] = unsigned(any_big);
  out[3 * threadIdx.x + 2] = unsigned(all_small);
}

// Each lane records, after a __syncwarp, the place it resumed at: order[k]
// is the k-th lane of the warp to run on after the collective.
__global__ void resume_order_kernel(int* order) {
  MPIASR_SHARED(int, next);
  if (threadIdx.x == 0) next = 0;
  __syncthreads();
  __syncwarp();
  order[atomicAdd(&next, 1)] = int(threadIdx.x);
}

// Each thread writes its slot and reads, after a __syncwarp only, the slot of
// the thread one warp on: nothing orders that other warp's write before it.
__global__ void other_warp_kernel(int* out) {
  MPIASR_SHARED(int[64], slots);
  const int t = threadIdx.x;
  slots[t] = t;
  __syncwarp();
  out[blockIdx.x * 64 + t] = slots[(t + 32) % 64];
}

__global__ void atomics_kernel(int* counters, unsigned* bits, float* float_sum, double* double_sum,
                               int* claimed, unsigned long long* wide) {
  const int t = int(blockIdx.x * blockDim.x + threadIdx.x);
  atomicAdd(&counters[0], 1);
  atomicSub(&counters[1], 2);
  atomicMax(&counters[2], t);
  atomicMin(&counters[3], -t);
  atomicOr(&bits[0], 1u << (t % 32));
  atomicAnd(&bits[1], ~(1u << (t % 32)));
  atomicXor(&bits[2], 1u << (t % 3));
  atomicAdd(float_sum, 1.0f);
  atomicAdd(double_sum, 0.5);
  atomicCAS(claimed, -1, t);  // exactly one thread wins
  atomicAdd(wide, 1ull << 33);
  atomicExch(&counters[4], 7);
}

__global__ void partial_barrier_kernel(int* out) {
  if (threadIdx.x < 16) __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void late_barrier_kernel(int* out) {
  if (threadIdx.x >= 16) return;
  __syncthreads();
  out[threadIdx.x] = 1;
}

__global__ void two_barriers_kernel(int* out) {
  if (threadIdx.x % 2) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

__global__ void exited_lanes_shuffle_kernel(int* out) {
  if (threadIdx.x >= 16) return;
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, int(threadIdx.x), 1);
}

__global__ void mask_without_caller_kernel(int* out) {
  out[threadIdx.x] = __shfl_sync(0x1u, int(threadIdx.x), 0);
}

__global__ void read_outside_mask_kernel(int* out) {
  const int lane = threadIdx.x;
  if (lane < 16) out[lane] = __shfl_sync(0x0000ffffu, lane, 20);
}

__global__ void mixed_collectives_kernel(int* out) {
  if (threadIdx.x % 2) {
    out[threadIdx.x] = int(__ballot_sync(0xffffffffu, 1));
  } else {
    out[threadIdx.x] = __shfl_sync(0xffffffffu, 1, 0);
  }
}

__global__ void missing_lanes_kernel(int* out) {
  out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1, 1);  // a block of 48: warp 1 has 16 lanes
}

__global__ void big_static_shared_kernel(float* out) {
  MPIASR_SHARED(float[8192], big);  // 32 KiB
  big[threadIdx.x] = 1.0f;
  out[threadIdx.x] = big[threadIdx.x];
}

__global__ void throwing_kernel(int* out) {
  if (threadIdx.x == 3) throw Error(ExitCode::kFailure, "thread 3 gives up");
  out[threadIdx.x] = 1;
}

__global__ void deep_stack_kernel(int* out) {
  int local[4096];  // 16 KiB of the fiber's 64 KiB stack
  for (int i = 0; i < 4096; ++i) local[i] = i * int(threadIdx.x + 1);
  __syncthreads();
  int sum = 0;
  for (int i = 0; i < 4096; i += 1024) sum += local[i];
  out[threadIdx.x] = sum;
}

__global__ void out_of_bounds_kernel(int* out, int n) {
  out[threadIdx.x + 1 == unsigned(n) ? n : threadIdx.x] = 1;  // the last thread writes out[n]
}

__global__ void shared_out_of_bounds_kernel(int* out) {
  MPIASR_SHARED(int[32], slots);
  slots[threadIdx.x] = 1;  // 33 threads
  out[0] = slots[0];
}

// ---- tests ------------------------------------------------------------------

TEST(Simt, BuiltInIndicesOfEveryThread) {
  const dim3 grid(3, 2, 2), block(4, 3, 2);
  const size_t threads = size_t(3 * 2 * 2) * (4 * 3 * 2);
  DeviceBuffer<uint32_t> out(4 * threads);
  MPIASR_LAUNCH(coordinates_kernel, grid, block, 0, nullptr, out.get());
  const std::vector<uint32_t> got = out.host();
  size_t i = 0;
  for (unsigned bz = 0; bz < 2; ++bz)
    for (unsigned by = 0; by < 2; ++by)
      for (unsigned bx = 0; bx < 3; ++bx)
        for (unsigned tz = 0; tz < 2; ++tz)
          for (unsigned ty = 0; ty < 3; ++ty)
            for (unsigned tx = 0; tx < 4; ++tx, ++i) {
              EXPECT_EQ(got[4 * i + 0], tx | ty << 10 | tz << 20) << i;
              EXPECT_EQ(got[4 * i + 1], bx | by << 10 | bz << 20) << i;
              EXPECT_EQ(got[4 * i + 2], 4u | 3u << 10 | 2u << 20) << i;
              EXPECT_EQ(got[4 * i + 3], 3u | 2u << 10 | 2u << 20) << i;
            }
}

TEST(Simt, BarrierWithStaticSharedMemoryUnderEverySchedule) {
  const int blocks = 40;
  std::vector<int> in(size_t(blocks) * 256);
  std::iota(in.begin(), in.end(), 1000);
  std::vector<int> expected(in.size());
  for (int b = 0; b < blocks; ++b) {
    for (int t = 0; t < 256; ++t) expected[size_t(b * 256 + t)] = in[size_t(b * 256 + 255 - t)];
  }
  for (Schedule schedule : {Schedule::kShuffled, Schedule::kAscending, Schedule::kDescending}) {
    ScheduleGuard guard(schedule);
    DeviceBuffer<int> d_in(in.size(), in), d_out(in.size());
    MPIASR_LAUNCH(reverse_kernel<true>, blocks, 256, 0, nullptr, d_out.get(), d_in.get());
    EXPECT_EQ(d_out.host(), expected) << "schedule " << int(schedule);
  }
}

// Without the barrier every schedule lets some reader run before its writer:
// the ascending one the first half, the descending one the second half, the
// shuffled one about half of each block. The slot then holds 0xFF bytes.
TEST(Simt, EveryScheduleExposesTheMissingBarrier) {
  std::vector<int> in(256);
  std::iota(in.begin(), in.end(), 0);
  for (Schedule schedule : {Schedule::kShuffled, Schedule::kAscending, Schedule::kDescending}) {
    ScheduleGuard guard(schedule);
    DeviceBuffer<int> d_in(in.size(), in), d_out(in.size());
    MPIASR_LAUNCH(reverse_kernel<false>, 1, 256, 0, nullptr, d_out.get(), d_in.get());
    const std::vector<int> got = d_out.host();
    int stale = 0, right = 0;
    for (int t = 0; t < 256; ++t) {
      stale += got[size_t(t)] == -1;
      right += got[size_t(t)] == 255 - t;
    }
    EXPECT_EQ(stale + right, 256) << "schedule " << int(schedule);
    if (schedule == Schedule::kShuffled) {
      EXPECT_GT(stale, 64);
      EXPECT_LT(stale, 192);
      // The same order again: the run repeats exactly.
      DeviceBuffer<int> again(in.size());
      MPIASR_LAUNCH(reverse_kernel<false>, 1, 256, 0, nullptr, again.get(), d_in.get());
      EXPECT_EQ(again.host(), got);
    } else {
      EXPECT_EQ(stale, 128) << "schedule " << int(schedule);
    }
  }
}

// Restores the schedule seed after a test that changes it.
class SeedGuard {
 public:
  explicit SeedGuard(uint64_t seed) : saved_(emu::schedule_seed()) { emu::set_schedule_seed(seed); }
  ~SeedGuard() { emu::set_schedule_seed(saved_); }

 private:
  uint64_t saved_;
};

std::vector<int> resume_order() {
  DeviceBuffer<int> order(32);
  MPIASR_LAUNCH(resume_order_kernel, 1, 32, 0, nullptr, order.get());
  return order.host();
}

// The lanes a collective releases resume in the schedule's order, the lane
// that completed it among them: ascending, descending, or a permutation drawn
// from the seed, the same for the same seed.
TEST(Simt, LanesResumeAfterACollectiveInTheScheduleOrder) {
  std::vector<int> ascending(32);
  std::iota(ascending.begin(), ascending.end(), 0);
  const std::vector<int> descending(ascending.rbegin(), ascending.rend());
  {
    ScheduleGuard guard(Schedule::kAscending);
    EXPECT_EQ(resume_order(), ascending);
  }
  {
    ScheduleGuard guard(Schedule::kDescending);
    EXPECT_EQ(resume_order(), descending);
  }
  std::vector<std::vector<int>> orders;
  for (uint64_t seed : {1, 2, 3}) {
    SeedGuard guard(seed);
    orders.push_back(resume_order());
    EXPECT_TRUE(std::is_permutation(orders.back().begin(), orders.back().end(), ascending.begin()));
    EXPECT_NE(orders.back(), ascending) << "seed " << seed;
    EXPECT_NE(orders.back(), descending) << "seed " << seed;
    EXPECT_EQ(resume_order(), orders.back()) << "seed " << seed;
  }
  EXPECT_NE(orders[0], orders[1]);
  EXPECT_NE(orders[1], orders[2]);
}

// The shuffled schedule mixes the lanes a collective releases into the
// threads still queued, so a warp past its __syncwarp may run before the
// other warp has written: some reads find the slot's 0xFF bytes. The fixed
// schedules queue the lanes after every thread already queued (the shuffled
// one did too before): there every write comes first.
TEST(Simt, AWarpPastACollectiveMayRunBeforeAnotherWarpsWrites) {
  const int blocks = 64;
  for (Schedule schedule : {Schedule::kShuffled, Schedule::kAscending, Schedule::kDescending}) {
    ScheduleGuard guard(schedule);
    DeviceBuffer<int> out(size_t(blocks) * 64);
    MPIASR_LAUNCH(other_warp_kernel, blocks, 64, 0, nullptr, out.get());
    const std::vector<int> got = out.host();
    int stale = 0, right = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      stale += got[i] == -1;
      right += got[i] == int(i + 32) % 64;
    }
    EXPECT_EQ(stale + right, int(got.size())) << "schedule " << int(schedule);
    if (schedule == Schedule::kShuffled) {
      EXPECT_GT(stale, 0);
    } else {
      EXPECT_EQ(stale, 0) << "schedule " << int(schedule);
    }
  }
}

// A failed launch names the seed that repeats it, or the fixed order it ran in.
TEST(SimtErrors, AFailedLaunchNamesTheScheduleSeed) {
  SeedGuard guard(7);
  DeviceBuffer<int> out(32);
  std::string error =
      launch_error([&] { MPIASR_LAUNCH(two_barriers_kernel, 1, 32, 0, nullptr, out.get()); });
  EXPECT_NE(error.find("(schedule seed 7, MPIASR_EMU_SEED)"), std::string::npos) << error;
  ScheduleGuard descending(Schedule::kDescending);
  error = launch_error([&] { MPIASR_LAUNCH(two_barriers_kernel, 1, 32, 0, nullptr, out.get()); });
  EXPECT_NE(error.find("(threads in descending order, MPIASR_EMU_SCHEDULE)"), std::string::npos)
      << error;
}

TEST(Simt, TreeSumInDynamicSharedMemoryWithBlocksOfEverySize) {
  for (int threads : {1, 32, 64, 512, 1024}) {
    const int blocks = 7;
    std::vector<double> in(size_t(blocks) * size_t(threads));
    for (size_t i = 0; i < in.size(); ++i) in[i] = double(i % 97) - 40.5;
    DeviceBuffer<double> d_in(in.size(), in), d_sums{size_t(blocks)};
    MPIASR_LAUNCH(tree_sum_kernel, blocks, threads, threads * sizeof(double), nullptr, d_sums.get(),
                  d_in.get());
    const std::vector<double> sums = d_sums.host();
    for (int b = 0; b < blocks; ++b) {
      double expected = 0.0;
      for (int t = 0; t < threads; ++t) expected += in[size_t(b * threads + t)];
      EXPECT_EQ(sums[size_t(b)], expected) << threads << " threads, block " << b;
    }
  }
}

// Expected values from CUDA's definitions, lane by lane.
TEST(Simt, ShufflesFollowCudaDefinitionsForEveryWidth) {
  for (int width : {32, 16, 8, 2}) {
    for (int argument : {0, 1, 3, 5}) {
      DeviceBuffer<int> out(6 * 64);
      MPIASR_LAUNCH(shuffle_kernel, 1, 64, 0, nullptr, out.get(), argument, width);
      const std::vector<int> got = out.host();
      for (int t = 0; t < 64; ++t) {
        const int lane = t % 32, warp_base = t - lane;
        const int segment = lane / width * width;
        const int indexed = segment + argument % width;
        const int up = lane - segment >= argument ? lane - argument : lane;
        const int down = lane - segment + argument < width ? lane + argument : lane;
        const int x = lane ^ argument;
        const int xored = x < segment + width ? x : lane;
        const std::string what = "width " + std::to_string(width) + " argument " +
                                 std::to_string(argument) + " thread " + std::to_string(t);
        EXPECT_EQ(got[size_t(6 * t + 0)], (warp_base + indexed) * 10) << what;
        EXPECT_EQ(got[size_t(6 * t + 1)], (warp_base + up) * 10) << what;
        EXPECT_EQ(got[size_t(6 * t + 2)], (warp_base + down) * 10) << what;
        EXPECT_EQ(got[size_t(6 * t + 3)], (warp_base + xored) * 10) << what;
        EXPECT_EQ(got[size_t(6 * t + 4)], 2 * (warp_base + xored) + 1) << what;
        EXPECT_EQ(got[size_t(6 * t + 5)], warp_base + down) << what;
      }
    }
  }
}

TEST(Simt, HalfWarpsReduceWithTheirOwnMasks) {
  DeviceBuffer<int> out(64);
  MPIASR_LAUNCH(half_warp_kernel, 1, 64, 0, nullptr, out.get());
  const std::vector<int> got = out.host();
  for (int t = 0; t < 64; ++t) {
    const int lane = t % 32;
    EXPECT_EQ(got[size_t(t)], lane < 16 ? 120 : 376) << t;  // 0+..+15, 16+..+31
  }
}

TEST(Simt, VotesOverLiveLanes) {
  for (int live : {32, 25, 7}) {
    DeviceBuffer<unsigned> out(3 * 64);
    MPIASR_LAUNCH(vote_kernel, 1, 64, 0, nullptr, out.get(), live);
    const std::vector<unsigned> got = out.host();
    unsigned odd = 0;
    for (int lane = 1; lane < live; lane += 2) odd |= 1u << lane;
    for (int t = 0; t < 64; ++t) {
      if (t % 32 >= live) continue;
      EXPECT_EQ(got[size_t(3 * t + 0)], odd) << live << " " << t;
      EXPECT_EQ(got[size_t(3 * t + 1)], live > 21 ? 1u : 0u) << live << " " << t;
      EXPECT_EQ(got[size_t(3 * t + 2)], live <= 20 ? 1u : 0u) << live << " " << t;
    }
  }
}

TEST(Simt, AtomicsAcrossBlocksOnBothThreads) {
  const int blocks = 64, threads = 128, n = blocks * threads;
  DeviceBuffer<int> counters(5, {0, 0, -1, 1, 0}), claimed(1, {-1});
  DeviceBuffer<unsigned> bits(3, {0u, 0xffffffffu, 0u});
  DeviceBuffer<float> float_sum(1);
  DeviceBuffer<double> double_sum(1);
  DeviceBuffer<unsigned long long> wide(1);
  MPIASR_LAUNCH(atomics_kernel, blocks, threads, 0, nullptr, counters.get(), bits.get(),
                float_sum.get(), double_sum.get(), claimed.get(), wide.get());
  EXPECT_EQ(counters.host(), (std::vector<int>{n, -2 * n, n - 1, -(n - 1), 7}));
  unsigned flipped = 0;
  for (int t = 0; t < n; ++t) flipped ^= 1u << (t % 3);
  EXPECT_EQ(bits.host(), (std::vector<unsigned>{0xffffffffu, 0u, flipped}));
  EXPECT_EQ(float_sum.host()[0], float(n));
  EXPECT_EQ(double_sum.host()[0], 0.5 * n);
  const int winner = claimed.host()[0];
  EXPECT_GE(winner, 0);
  EXPECT_LT(winner, n);
  EXPECT_EQ(wide.host()[0], (unsigned long long)n << 33);
}

TEST(Simt, LocalArraysFitTheFiberStack) {
  DeviceBuffer<int> out(128);
  MPIASR_LAUNCH(deep_stack_kernel, 1, 128, 0, nullptr, out.get());
  const std::vector<int> got = out.host();
  for (int t = 0; t < 128; ++t) EXPECT_EQ(got[size_t(t)], (0 + 1024 + 2048 + 3072) * (t + 1));
}

TEST(SimtErrors, LaunchConfigurationsBeyondTheLimits) {
  DeviceBuffer<int> out(2048);
  std::string error =
      launch_error([&] { MPIASR_LAUNCH(partial_barrier_kernel, 1, 1025, 0, nullptr, out.get()); });
  EXPECT_NE(error.find("launch of kernel partial_barrier_kernel failed: block (1025,1,1) of 1025 "
                       "threads: at most 1024 threads per block"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("simt_test.cpp:"), std::string::npos) << error;
  error = launch_error(
      [&] { MPIASR_LAUNCH(partial_barrier_kernel, 1, dim3(1, 1, 65), 0, nullptr, out.get()); });
  EXPECT_NE(error.find("block (1,1,65)"), std::string::npos) << error;
  error =
      launch_error([&] { MPIASR_LAUNCH(partial_barrier_kernel, 0, 32, 0, nullptr, out.get()); });
  EXPECT_NE(error.find("grid (0,1,1)"), std::string::npos) << error;
  error = launch_error(
      [&] { MPIASR_LAUNCH(partial_barrier_kernel, dim3(1, 65536), 32, 0, nullptr, out.get()); });
  EXPECT_NE(error.find("grid (1,65536,1)"), std::string::npos) << error;
  error = launch_error(
      [&] { MPIASR_LAUNCH(partial_barrier_kernel, 1, 32, 49153, nullptr, out.get()); });
  EXPECT_NE(error.find("49153 bytes of dynamic shared memory"), std::string::npos) << error;

  // 32 KiB static + 16 KiB dynamic fit; one byte more does not.
  DeviceBuffer<float> floats(64);
  MPIASR_LAUNCH(big_static_shared_kernel, 1, 64, 16384, nullptr, floats.get());
  error = launch_error(
      [&] { MPIASR_LAUNCH(big_static_shared_kernel, 1, 64, 16385, nullptr, floats.get()); });
  EXPECT_NE(error.find("shared variable big of 32768 bytes takes the block's shared memory to "
                       "49153 bytes"),
            std::string::npos)
      << error;

  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  MPIASR_LAUNCH(partial_barrier_kernel, 1, 16, 0, stream, out.get());
  ASSERT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  error = launch_error([&] { MPIASR_LAUNCH(partial_barrier_kernel, 1, 16, 0, stream, out.get()); });
  EXPECT_NE(error.find("the stream was not created or has been destroyed"), std::string::npos)
      << error;
}

// Each misuse fails the launch with a message naming the kernel and the
// place, and the emulator runs the next launch normally.
TEST(SimtErrors, MisusedBarriersAndCollectivesFailInsteadOfHanging) {
  DeviceBuffer<int> out(64);
  struct Case {
    std::string kernel;
    std::function<void()> launch;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"partial_barrier_kernel",
       [&] { MPIASR_LAUNCH(partial_barrier_kernel, 2, 32, 0, nullptr, out.get()); },
       "a barrier must be reached by every thread"},
      {"late_barrier_kernel",
       [&] { MPIASR_LAUNCH(late_barrier_kernel, 1, 32, 0, nullptr, out.get()); },
       "a barrier must be reached by every thread"},
      {"two_barriers_kernel",
       [&] { MPIASR_LAUNCH(two_barriers_kernel, 1, 32, 0, nullptr, out.get()); },
       "threads wait at two different __syncthreads"},
      {"exited_lanes_shuffle_kernel",
       [&] { MPIASR_LAUNCH(exited_lanes_shuffle_kernel, 1, 32, 0, nullptr, out.get()); },
       "__shfl_xor_sync"},
      {"mask_without_caller_kernel",
       [&] { MPIASR_LAUNCH(mask_without_caller_kernel, 1, 32, 0, nullptr, out.get()); },
       "the mask leaves out the calling lane"},
      {"read_outside_mask_kernel",
       [&] { MPIASR_LAUNCH(read_outside_mask_kernel, 1, 32, 0, nullptr, out.get()); },
       "reads lane 20, which is not in the mask"},
      {"mixed_collectives_kernel",
       [&] { MPIASR_LAUNCH(mixed_collectives_kernel, 1, 32, 0, nullptr, out.get()); },
       "meets lanes"},
      {"missing_lanes_kernel",
       [&] { MPIASR_LAUNCH(missing_lanes_kernel, 1, 48, 0, nullptr, out.get()); },
       "the mask names lanes the warp does not have (it has 0xffff)"},
      {"throwing_kernel", [&] { MPIASR_LAUNCH(throwing_kernel, 1, 32, 0, nullptr, out.get()); },
       "thread (3,0,0): the kernel threw: thread 3 gives up"},
  };
  for (const Case& c : cases) {
    for (Schedule schedule : {Schedule::kShuffled, Schedule::kAscending, Schedule::kDescending}) {
      ScheduleGuard guard(schedule);
      const std::string error = launch_error(c.launch);
      EXPECT_NE(error.find("launch of kernel " + c.kernel + " failed: block ("), std::string::npos)
          << error;
      EXPECT_NE(error.find(c.expected), std::string::npos) << c.kernel << ": " << error;
      EXPECT_NE(error.find("simt_test.cpp:"), std::string::npos) << error;
    }
    // The fibers of the abandoned block are reset and serve again.
    std::vector<double> in(256, 1.0);
    DeviceBuffer<double> d_in(in.size(), in), sums(1);
    MPIASR_LAUNCH(tree_sum_kernel, 1, 256, 256 * sizeof(double), nullptr, sums.get(), d_in.get());
    EXPECT_EQ(sums.host()[0], 256.0) << "after " << c.kernel;
  }
}

// Every block fails; blocks run on two OS threads, and block 0 is named.
TEST(SimtErrors, AManyBlockLaunchNamesTheLowestFailedBlock) {
  DeviceBuffer<int> out(32);
  const std::string error =
      launch_error([&] { MPIASR_LAUNCH(two_barriers_kernel, 100, 32, 0, nullptr, out.get()); });
  EXPECT_NE(error.find("failed: block (0,0,0), thread ("), std::string::npos) << error;
  EXPECT_NE(error.find("threads wait at two different __syncthreads"), std::string::npos) << error;
}

TEST(SimtDeathTest, AddressSanitizerCatchesOutOfBoundsInGlobalMemory) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        DeviceBuffer<int> out(64);
        MPIASR_LAUNCH(out_of_bounds_kernel, 1, 64, 0, nullptr, out.get(), 64);
      },
      "AddressSanitizer: heap-buffer-overflow.*WRITE of size 4.*fiber_main");
}

TEST(SimtDeathTest, AddressSanitizerCatchesOutOfBoundsInSharedMemory) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        DeviceBuffer<int> out(1);
        MPIASR_LAUNCH(shared_out_of_bounds_kernel, 1, 33, 0, nullptr, out.get());
      },
      "AddressSanitizer: use-after-poison.*WRITE of size 4.*fiber_main");
}

}  // namespace
}  // namespace mpiasr
