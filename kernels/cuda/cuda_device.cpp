// Device count and properties from the CUDA runtime (see cuda_device.h).
#include "kernels/cuda/cuda_device.h"

#include <cuda_runtime.h>

#include "kernels/cuda/cuda_check.h"

namespace mpiasr {

namespace {

int attribute(cudaDeviceAttr attr, int device) {
  int value = 0;
  CUDA_CHECK(cudaDeviceGetAttribute(&value, attr, device));
  return value;
}

// Dense fp16 tensor-core FLOPs per SM per clock, with fp32 accumulation.
double fp16_flops_per_sm_clock(int major, int minor) {
  if (major == 8 && minor == 0) return 2048;
  if (major == 8 && (minor == 6 || minor == 9)) return 1024;
  if (major == 9 && minor == 0) return 4096;
  return 0;
}

}  // namespace

CudaDeviceCount cuda_device_count() {
  CudaDeviceCount result;
  const cudaError_t status = cudaGetDeviceCount(&result.count);
  if (status != cudaSuccess) {
    result.count = 0;
    result.error = std::string(cudaGetErrorString(status)) + " (CUDA error " +
                   std::to_string(int(status)) + ")";
    (void)cudaGetLastError();  // clear it, so later checks do not see it
  } else if (result.count == 0) {
    result.error = "the CUDA runtime found no device";
  }
  return result;
}

CudaDeviceInfo cuda_device_info(int device) {
  cudaDeviceProp prop{};
  CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  CudaDeviceInfo info;
  info.name = prop.name;
  info.major = prop.major;
  info.minor = prop.minor;
  info.sm_count = prop.multiProcessorCount;
  info.total_memory = prop.totalGlobalMem;
  const double memory_khz = attribute(cudaDevAttrMemoryClockRate, device);
  const double bus_bits = attribute(cudaDevAttrGlobalMemoryBusWidth, device);
  info.peak_memory_gbps = 2.0 * memory_khz * 1e3 * bus_bits / 8.0 / 1e9;
  const double clock_khz = attribute(cudaDevAttrClockRate, device);
  info.peak_fp16_tflops =
      info.sm_count * clock_khz * 1e3 * fp16_flops_per_sm_clock(info.major, info.minor) / 1e12;
  return info;
}

}  // namespace mpiasr
