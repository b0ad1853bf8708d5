// Device memory checks of the emulator (kernels/cuda_emu/memory_check.h) on
// kernels compiled as kernels/cuda is, every load and store checked: fresh
// cudaMalloc and device-arena memory reads as the 0xFF pattern, and under
// initcheck a kernel that reads a byte no kernel, copy or memset wrote fails
// with its name and the offset, while reads of written bytes pass; a write
// one past an arena allocation (reported in the kernel's frame) and a
// misaligned vector load stop the test.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/device_arena.h"
#include "kernels/cuda/launch.h"
#include "kernels/cuda_emu/memory_check.h"
#include "src/base/error.h"
#include "tests/cuda_emu/launch_error.h"

namespace mpiasr {
namespace {

using emu_test::launch_error;

__global__ void write_kernel(float* out, int n) {
  const int i = int(threadIdx.x);
  if (i < n) out[i] = float(i);
}

__global__ void copy_kernel(float* out, const float* in, int n) {
  const int i = int(threadIdx.x);
  if (i < n) out[i] = in[i];
}

// The last thread writes one float past `n`.
__global__ void overrun_kernel(float* out, int n) {
  out[threadIdx.x + 1 == unsigned(n) ? n : threadIdx.x] = 1.0f;
}

// A 16-byte load from `in + offset`, 16-byte aligned only when offset % 4 == 0.
__global__ void vector_load_kernel(float* out, const float* in, int offset) {
  const float4 v = *reinterpret_cast<const float4*>(in + offset);
  out[threadIdx.x] = v.x + v.y + v.z + v.w;
}

// Turns initcheck on for the allocations of one test.
class InitcheckGuard {
 public:
  InitcheckGuard() { emu::set_initcheck(true); }
  ~InitcheckGuard() { emu::set_initcheck(false); }
};

std::vector<uint8_t> bytes_of(const void* device, size_t n) {
  std::vector<uint8_t> out(n);
  EXPECT_EQ(cudaMemcpy(out.data(), device, n, cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

TEST(MemoryCheck, FreshDeviceMemoryReadsAsThePattern) {
  void* memory = nullptr;
  ASSERT_EQ(cudaMalloc(&memory, 1000), cudaSuccess);
  EXPECT_EQ(bytes_of(memory, 1000), std::vector<uint8_t>(1000, 0xFF));
  ASSERT_EQ(cudaFree(memory), cudaSuccess);

  // A range the arena hands out again after its last owner wrote it.
  DeviceArena arena(1 << 20);
  void* first = arena.allocate(512);
  ASSERT_EQ(cudaMemset(first, 0, 512), cudaSuccess);
  arena.release(first);
  void* second = arena.allocate(512);
  EXPECT_EQ(second, first);
  EXPECT_EQ(bytes_of(second, 512), std::vector<uint8_t>(512, 0xFF));
  arena.release(second);
}

// 64 floats, 63 written by a kernel: reading 63 passes, reading the 64th
// (never written) fails with the kernel's name and the offset 252.
TEST(MemoryCheck, InitcheckReportsAReadOfAByteNeverWritten) {
  InitcheckGuard guard;
  float *in = nullptr, *out = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&in), 64 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&out), 64 * sizeof(float)), cudaSuccess);
  MPIASR_LAUNCH(write_kernel, 1, 64, 0, nullptr, in, 63);
  EXPECT_EQ(launch_error([&] { MPIASR_LAUNCH(copy_kernel, 1, 64, 0, nullptr, out, in, 63); }), "");
  const std::string error =
      launch_error([&] { MPIASR_LAUNCH(copy_kernel, 1, 64, 0, nullptr, out, in, 64); });
  EXPECT_NE(error.find("launch of kernel copy_kernel failed"), std::string::npos) << error;
  EXPECT_NE(error.find("thread (63,0,0)"), std::string::npos) << error;
  EXPECT_NE(error.find("initcheck: a read of 4 bytes at offset 252 of a device allocation of "
                       "256 bytes, whose byte 252 was never written"),
            std::string::npos)
      << error;
  // A memset writes the rest.
  ASSERT_EQ(cudaMemset(in + 63, 0, sizeof(float)), cudaSuccess);
  EXPECT_EQ(launch_error([&] { MPIASR_LAUNCH(copy_kernel, 1, 64, 0, nullptr, out, in, 64); }), "");
  ASSERT_EQ(cudaFree(in), cudaSuccess);
  ASSERT_EQ(cudaFree(out), cudaSuccess);
}

// An arena range handed out again is unwritten again, whatever its last
// owner wrote; a copy into it counts as written.
TEST(MemoryCheck, InitcheckForgetsWhatAnArenaRangeHeldBefore) {
  InitcheckGuard guard;
  DeviceArena arena(1 << 20);
  float* out = static_cast<float*>(arena.allocate(32 * sizeof(float)));
  float* first = static_cast<float*>(arena.allocate(32 * sizeof(float)));
  MPIASR_LAUNCH(write_kernel, 1, 32, 0, nullptr, first, 32);
  arena.release(first);
  float* second = static_cast<float*>(arena.allocate(32 * sizeof(float)));
  ASSERT_EQ(second, first);
  const std::string error =
      launch_error([&] { MPIASR_LAUNCH(copy_kernel, 1, 32, 0, nullptr, out, second, 32); });
  EXPECT_NE(error.find("initcheck: a read of 4 bytes at offset "), std::string::npos) << error;
  const std::vector<float> host(32, 1.0f);
  ASSERT_EQ(cudaMemcpy(second, host.data(), sizeof(float) * 32, cudaMemcpyHostToDevice),
            cudaSuccess);
  EXPECT_EQ(launch_error([&] { MPIASR_LAUNCH(copy_kernel, 1, 32, 0, nullptr, out, second, 32); }),
            "");
  arena.release(second);
  arena.release(out);
}

// Two arena allocations of 256 bytes each: without the redzone the second
// would start where the first ends, and a write one float past the first
// would land in it unseen.
TEST(MemoryCheckDeathTest, AWriteOnePastAnArenaAllocationHitsItsRedzone) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        DeviceArena arena(1 << 20);
        float* first = static_cast<float*>(arena.allocate(64 * sizeof(float)));
        float* second = static_cast<float*>(arena.allocate(64 * sizeof(float)));
        MPIASR_LAUNCH(overrun_kernel, 1, 64, 0, nullptr, first, 64);
        arena.release(second);
      },
      "AddressSanitizer: use-after-poison.*WRITE of size 4.*overrun_kernel.*fiber_main");
}

TEST(MemoryCheckDeathTest, AMisalignedVectorLoadIsReported) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  float *in = nullptr, *out = nullptr;
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&in), 64 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMalloc(reinterpret_cast<void**>(&out), 32 * sizeof(float)), cudaSuccess);
  ASSERT_EQ(cudaMemset(in, 0, 64 * sizeof(float)), cudaSuccess);
  MPIASR_LAUNCH(vector_load_kernel, 1, 32, 0, nullptr, out, in, 4);
  EXPECT_DEATH(
      MPIASR_LAUNCH(vector_load_kernel, 1, 32, 0, nullptr, out, in, 1),
      "misaligned address .* for type 'const struct float4', which requires 16 byte alignment");
  ASSERT_EQ(cudaFree(in), cudaSuccess);
  ASSERT_EQ(cudaFree(out), cudaSuccess);
}

}  // namespace
}  // namespace mpiasr
