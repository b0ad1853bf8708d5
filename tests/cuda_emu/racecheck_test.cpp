// racecheck (kernels/cuda_emu/racecheck.h) on small kernels compiled as
// kernels/cuda is, every load and store checked: a hand-off between threads
// through shared or global memory is reported without the barrier or warp
// collective that orders it and passes with it; a __syncwarp orders the lanes
// of its mask only; a write races with every read nothing orders before it,
// not only the last (several warps, or several lanes of one warp, read a
// tile, then its last reader overwrites it); blocks of one launch race on
// global memory unless both accesses are atomics; launches are ordered.
// Threads run in ascending order, so which access of a race comes second,
// and so the report, is fixed.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <string>

#include "kernels/cuda/launch.h"
#include "kernels/cuda_emu/memory_check.h"
#include "src/base/error.h"
#include "tests/cuda_emu/launch_error.h"

namespace mpiasr {
namespace {

using emu_test::launch_error;

// kSyncLowHalf: a __syncwarp over lanes 0-15, which lanes 16-31 skip.
enum class Sync { kNone, kSyncWarp, kSyncLowHalf, kSyncThreads };

void synchronize(Sync how) {
  if (how == Sync::kSyncWarp) __syncwarp();
  if (how == Sync::kSyncLowHalf && threadIdx.x % 32 < 16) __syncwarp(0x0000ffffu);
  if (how == Sync::kSyncThreads) __syncthreads();
}

// Thread t hands s[t] to thread (t + distance) % blockDim.x through dynamic
// shared memory, synchronized by `how` between the write and the read.
__global__ void shared_hand_off_kernel(float* out, int distance, Sync how) {
  MPIASR_DYNAMIC_SHARED(float, s);
  const int t = int(threadIdx.x), n = int(blockDim.x);
  s[t] = float(t);
  synchronize(how);
  out[t] = s[(t + n - distance) % n];
}

// Threads 0-31 write the tile s[0..32); after a barrier every thread sums
// it; then, synchronized by `how`, thread `writer` adds its sum to s[0].
__global__ void tile_overwrite_kernel(float* out, int writer, Sync how) {
  MPIASR_DYNAMIC_SHARED(float, s);
  const int t = int(threadIdx.x);
  if (t < 32) s[t] = float(t);
  __syncthreads();
  float sum = 0.0f;
  for (int i = 0; i < 32; ++i) sum += s[i];
  out[t] = sum;
  synchronize(how);
  if (t == writer) s[0] += sum;
  __syncthreads();
  if (t == 0) out[blockDim.x] = s[0];
}

// Lanes 0-15 and lanes 16-31 each __syncwarp over their own half, then read
// the other half's (`across`) or their own half's values.
__global__ void half_warp_kernel(float* out, bool across) {
  MPIASR_DYNAMIC_SHARED(float, s);
  const int t = int(threadIdx.x);
  s[t] = float(t);
  __syncwarp(t < 16 ? 0x0000ffffu : 0xffff0000u);
  out[t] = s[across ? t ^ 16 : (t & 16) | ((t + 1) & 15)];
}

// Thread 0 of every block adds its block's index into total[0], atomically or not.
__global__ void add_across_blocks_kernel(float* total, bool atomic) {
  if (threadIdx.x != 0) return;
  if (atomic) {
    atomicAdd(total, float(blockIdx.x));
  } else {
    total[0] += float(blockIdx.x);
  }
}

// Every block reads all of `in` and writes its own row of `out`.
__global__ void rows_kernel(float* out, const float* in, int n) {
  float sum = 0.0f;
  for (int i = 0; i < n; ++i) sum += in[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}

// Thread t writes global x[t]; after a __syncthreads (or none) thread t reads x[t ^ 32].
__global__ void global_hand_off_kernel(float* x, float* out, bool barrier) {
  const int t = int(threadIdx.x);
  x[t] = float(t);
  if (barrier) __syncthreads();
  out[t] = x[t ^ 32];
}

// Every thread of the block adds to one shared counter atomically, then
// thread 0 reads it after the barrier.
__global__ void shared_atomics_kernel(int* out) {
  MPIASR_SHARED(int, counter);
  if (threadIdx.x == 0) counter = 0;
  __syncthreads();
  atomicAdd(&counter, 1);
  __syncthreads();
  if (threadIdx.x == 0) *out = counter;
}

// Turns racecheck on for the allocations and launches of one test, with the
// threads of a block in ascending order.
class RacecheckGuard {
 public:
  RacecheckGuard() {
    emu::set_racecheck(true);
    emu::set_schedule(emu::Schedule::kAscending);
  }
  ~RacecheckGuard() {
    emu::set_racecheck(false);
    emu::set_schedule(emu::Schedule::kShuffled);
  }
};

template <typename T>
T* device_array(size_t n) {
  T* memory = nullptr;
  EXPECT_EQ(cudaMalloc(reinterpret_cast<void**>(&memory), n * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemset(memory, 0, n * sizeof(T)), cudaSuccess);
  return memory;
}

std::string expected(const std::string& kernel, const std::string& second,
                     const std::string& race) {
  return "launch of kernel " + kernel + " failed: block (0,0,0), thread " + second +
         ": racecheck: " + race;
}

// Within a block: thread 32 writes s[32] after thread 0 read it (no barrier);
// within a warp: lane 1 writes s[1] after lane 0 read it (no collective).
TEST(Racecheck, ReportsAHandOffWithoutSynchronization) {
  RacecheckGuard guard;
  float* out = device_array<float>(64);
  std::string error = launch_error(
      [&] { MPIASR_LAUNCH(shared_hand_off_kernel, 1, 64, 256, nullptr, out, 32, Sync::kNone); });
  EXPECT_NE(error.find(expected("shared_hand_off_kernel", "(32,0,0)",
                                "a write of 4 bytes at offset 128 of shared memory races with a "
                                "read by thread (0,0,0) of this block: no __syncthreads between "
                                "them")),
            std::string::npos)
      << error;
  error = launch_error(
      [&] { MPIASR_LAUNCH(shared_hand_off_kernel, 1, 32, 128, nullptr, out, 31, Sync::kNone); });
  EXPECT_NE(error.find(expected("shared_hand_off_kernel", "(1,0,0)",
                                "a write of 4 bytes at offset 4 of shared memory races with a "
                                "read by thread (0,0,0) of this block: lanes of one warp with no "
                                "__syncthreads or warp collective over both between them")),
            std::string::npos)
      << error;
  ASSERT_EQ(cudaFree(out), cudaSuccess);
}

// __syncwarp orders a hand-off within a warp, not one between two warps:
// thread 0 reads s[32], which thread 32 wrote in the same interval.
TEST(Racecheck, SyncwarpOrdersTheLanesOfItsWarpOnly) {
  RacecheckGuard guard;
  float* out = device_array<float>(64);
  EXPECT_EQ(launch_error([&] {
              MPIASR_LAUNCH(shared_hand_off_kernel, 1, 32, 128, nullptr, out, 31, Sync::kSyncWarp);
            }),
            "");
  const std::string error = launch_error([&] {
    MPIASR_LAUNCH(shared_hand_off_kernel, 1, 64, 256, nullptr, out, 32, Sync::kSyncWarp);
  });
  EXPECT_NE(error.find(expected("shared_hand_off_kernel", "(0,0,0)",
                                "a read of 4 bytes at offset 128 of shared memory races with a "
                                "write by thread (32,0,0) of this block: no __syncthreads between "
                                "them")),
            std::string::npos)
      << error;
  EXPECT_EQ(launch_error([&] {
              MPIASR_LAUNCH(shared_hand_off_kernel, 1, 64, 256, nullptr, out, 32,
                            Sync::kSyncThreads);
            }),
            "");
  ASSERT_EQ(cudaFree(out), cudaSuccess);
}

// A __syncwarp over lanes 0-15 orders them among themselves, not with 16-31.
TEST(Racecheck, SyncwarpOrdersTheLanesOfItsMaskOnly) {
  RacecheckGuard guard;
  float* out = device_array<float>(32);
  EXPECT_EQ(launch_error([&] { MPIASR_LAUNCH(half_warp_kernel, 1, 32, 128, nullptr, out, false); }),
            "");
  const std::string error =
      launch_error([&] { MPIASR_LAUNCH(half_warp_kernel, 1, 32, 128, nullptr, out, true); });
  EXPECT_NE(error.find(expected("half_warp_kernel", "(0,0,0)",
                                "a read of 4 bytes at offset 64 of shared memory races with a "
                                "write by thread (16,0,0) of this block: lanes of one warp")),
            std::string::npos)
      << error;
  ASSERT_EQ(cudaFree(out), cudaSuccess);
}

// Four warps read the tile; the last reader, thread 127, then overwrites
// s[0]: a race with the reads of the other warps (the report names one),
// which a __syncwarp does not order and a __syncthreads does.
TEST(Racecheck, AWriteRacesWithTheReadsOfEveryWarp) {
  RacecheckGuard guard;
  float* out = device_array<float>(129);
  for (Sync how : {Sync::kNone, Sync::kSyncWarp}) {
    const std::string error = launch_error(
        [&] { MPIASR_LAUNCH(tile_overwrite_kernel, 1, 128, 128, nullptr, out, 127, how); });
    EXPECT_NE(error.find(expected("tile_overwrite_kernel", "(127,0,0)",
                                  "a write of 4 bytes at offset 0 of shared memory races with a "
                                  "read by thread (95,0,0) of this block: no __syncthreads "
                                  "between them")),
              std::string::npos)
        << error;
  }
  EXPECT_EQ(launch_error([&] {
              MPIASR_LAUNCH(tile_overwrite_kernel, 1, 128, 128, nullptr, out, 127,
                            Sync::kSyncThreads);
            }),
            "");
  float sums[129] = {};
  ASSERT_EQ(cudaMemcpy(sums, out, sizeof sums, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(sums[0], 496.0f);    // 0 + 1 + ... + 31
  EXPECT_EQ(sums[128], 496.0f);  // s[0] = 0 plus thread 127's sum
  ASSERT_EQ(cudaFree(out), cudaSuccess);
}

// One warp reads the tile; its last reader, lane 31, then overwrites s[0]: a
// race with each other lane's read, which a __syncwarp orders; a __syncwarp
// over lanes 0-15 orders the reads of those lanes only.
TEST(Racecheck, ALaneRacesWithTheReadsOfEveryOtherLane) {
  RacecheckGuard guard;
  float* out = device_array<float>(33);
  std::string error = launch_error(
      [&] { MPIASR_LAUNCH(tile_overwrite_kernel, 1, 32, 128, nullptr, out, 31, Sync::kNone); });
  EXPECT_NE(error.find(expected("tile_overwrite_kernel", "(31,0,0)",
                                "a write of 4 bytes at offset 0 of shared memory races with a "
                                "read by thread (0,0,0) of this block: lanes of one warp with no "
                                "__syncthreads or warp collective over both between them")),
            std::string::npos)
      << error;
  error = launch_error([&] {
    MPIASR_LAUNCH(tile_overwrite_kernel, 1, 32, 128, nullptr, out, 15, Sync::kSyncLowHalf);
  });
  EXPECT_NE(error.find(expected("tile_overwrite_kernel", "(15,0,0)",
                                "a write of 4 bytes at offset 0 of shared memory races with a "
                                "read by thread (16,0,0) of this block: lanes of one warp")),
            std::string::npos)
      << error;
  EXPECT_EQ(launch_error([&] {
              MPIASR_LAUNCH(tile_overwrite_kernel, 1, 32, 128, nullptr, out, 31, Sync::kSyncWarp);
            }),
            "");
  float sums[33] = {};
  ASSERT_EQ(cudaMemcpy(sums, out, sizeof sums, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(sums[31], 496.0f);
  EXPECT_EQ(sums[32], 496.0f);
  ASSERT_EQ(cudaFree(out), cudaSuccess);
}

// Global memory within a block: a hand-off between warps needs the barrier.
TEST(Racecheck, GlobalMemoryWithinABlockIsOrderedByItsBarriers) {
  RacecheckGuard guard;
  float* x = device_array<float>(64);
  float* out = device_array<float>(64);
  EXPECT_EQ(
      launch_error([&] { MPIASR_LAUNCH(global_hand_off_kernel, 1, 64, 0, nullptr, x, out, true); }),
      "");
  const std::string error = launch_error(
      [&] { MPIASR_LAUNCH(global_hand_off_kernel, 1, 64, 0, nullptr, x, out, false); });
  EXPECT_NE(error.find(expected("global_hand_off_kernel", "(32,0,0)",
                                "a write of 4 bytes at offset 128 of a device allocation of 256 "
                                "bytes races with a read by thread (0,0,0) of this block")),
            std::string::npos)
      << error;
  ASSERT_EQ(cudaFree(x), cudaSuccess);
  ASSERT_EQ(cudaFree(out), cudaSuccess);
}

// Blocks of a launch: a plain += into one float by two blocks races (which
// block comes second depends on the OS threads); atomics do not; reading
// common input and writing one's own row is fine; launches are ordered.
TEST(Racecheck, BlocksOfALaunchRaceUnlessBothAccessesAreAtomic) {
  RacecheckGuard guard;
  float* total = device_array<float>(1);
  const std::string error = launch_error(
      [&] { MPIASR_LAUNCH(add_across_blocks_kernel, 2, 32, 0, nullptr, total, false); });
  EXPECT_NE(error.find("launch of kernel add_across_blocks_kernel failed: block "),
            std::string::npos)
      << error;
  EXPECT_NE(error.find(" of a device allocation of 4 bytes races with a "), std::string::npos)
      << error;
  EXPECT_NE(error.find(": blocks of one launch are not ordered"), std::string::npos) << error;

  ASSERT_EQ(cudaMemset(total, 0, sizeof(float)), cudaSuccess);
  EXPECT_EQ(launch_error(
                [&] { MPIASR_LAUNCH(add_across_blocks_kernel, 8, 32, 0, nullptr, total, true); }),
            "");
  float sum = 0.0f;
  ASSERT_EQ(cudaMemcpy(&sum, total, sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(sum, 28.0f);  // 0 + 1 + ... + 7

  float* in = device_array<float>(16);
  float* out = device_array<float>(4 * 32);
  EXPECT_EQ(launch_error([&] { MPIASR_LAUNCH(rows_kernel, 4, 32, 0, nullptr, out, in, 16); }), "");
  // Each launch's single block, one after the other: ordered.
  EXPECT_EQ(launch_error(
                [&] { MPIASR_LAUNCH(add_across_blocks_kernel, 1, 32, 0, nullptr, total, false); }),
            "");
  EXPECT_EQ(launch_error(
                [&] { MPIASR_LAUNCH(add_across_blocks_kernel, 1, 32, 0, nullptr, total, false); }),
            "");
  ASSERT_EQ(cudaFree(total), cudaSuccess);
  ASSERT_EQ(cudaFree(in), cudaSuccess);
  ASSERT_EQ(cudaFree(out), cudaSuccess);
}

// Atomics of one block on shared memory do not race with each other.
TEST(Racecheck, AtomicsDoNotRaceWithAtomics) {
  RacecheckGuard guard;
  int* out = device_array<int>(1);
  EXPECT_EQ(launch_error([&] { MPIASR_LAUNCH(shared_atomics_kernel, 1, 96, 0, nullptr, out); }),
            "");
  int count = 0;
  ASSERT_EQ(cudaMemcpy(&count, out, sizeof(int), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(count, 96);
  ASSERT_EQ(cudaFree(out), cudaSuccess);
}

}  // namespace
}  // namespace mpiasr
