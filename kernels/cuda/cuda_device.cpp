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

DatasheetPeaks datasheet_peaks(const std::string& name) {
  // Most specific names first: "H100 PCIe" before "H100".
  struct Row {
    const char* name;
    DatasheetPeaks peaks;
  };
  static const Row kTable[] = {
      {"H200", {989.4, 4800}}, {"H100 PCIe", {756.0, 2000}},      {"H100 NVL", {835.0, 3900}},
      {"H100", {989.4, 3350}}, {"A100-SXM4-80GB", {312.0, 2039}}, {"A100 80GB PCIe", {312.0, 1935}},
      {"A100", {312.0, 1555}},
  };
  for (const Row& row : kTable) {
    if (name.find(row.name) != std::string::npos) return row.peaks;
  }
  return {};
}

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
  const DatasheetPeaks datasheet = datasheet_peaks(info.name);
  if (datasheet.fp16_tflops > 0) {
    info.peak_fp16_tflops = datasheet.fp16_tflops;
    info.peak_memory_gbps = datasheet.memory_gbps;
    return info;
  }
  const double memory_khz = attribute(cudaDevAttrMemoryClockRate, device);
  const double bus_bits = attribute(cudaDevAttrGlobalMemoryBusWidth, device);
  info.peak_memory_gbps = 2.0 * memory_khz * 1e3 * bus_bits / 8.0 / 1e9;
  const double clock_khz = attribute(cudaDevAttrClockRate, device);
  info.peak_fp16_tflops =
      info.sm_count * clock_khz * 1e3 * fp16_flops_per_sm_clock(info.major, info.minor) / 1e12;
  return info;
}

}  // namespace mpiasr
