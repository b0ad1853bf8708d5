// Finding the CUDA devices this process can use, and what they can do.
//
// cuda_device_count never throws: on a machine without a GPU or without a
// driver the runtime reports an error (e.g. 35, "CUDA driver version is
// insufficient for CUDA runtime version"), which is returned as the reason
// there is no device, so tests and the trainer can skip or stop with it.
//
// Peaks (for the benchmarks' ratios): the vendor's datasheet figures where the
// device is one of datasheet_peaks' table (dense fp16 tensor-core FLOP/s with
// fp32 accumulation, HBM bandwidth), since the boost clock the runtime reports
// overstates what the chip sustains (an H200 would come out at ~1070 TFLOP/s
// instead of its 989). Otherwise derived from the runtime's attributes: memory
// bandwidth = 2 x memory clock x bus width (double data rate); dense fp16
// FLOP/s = SMs x clock x FLOPs per SM per clock of the architecture (2048 on
// sm_80, 1024 on sm_86 and sm_89, 4096 on sm_90), 0 when the architecture is
// not in that table.
#pragma once

#include <cstddef>
#include <string>

namespace mpiasr {

struct CudaDeviceCount {
  int count = 0;
  std::string error;  // why count is 0, empty when devices were found
};

CudaDeviceCount cuda_device_count();

struct CudaDeviceInfo {
  std::string name;
  int major = 0, minor = 0;  // compute capability
  int sm_count = 0;
  size_t total_memory = 0;      // bytes
  double peak_memory_gbps = 0;  // GB/s
  double peak_fp16_tflops = 0;  // dense tensor-core TFLOP/s, 0 if unknown
};

CudaDeviceInfo cuda_device_info(int device);

// Datasheet peaks of the device named `name` (cudaDeviceProp::name, e.g.
// "NVIDIA H200"); zeros when the name is not in the table.
struct DatasheetPeaks {
  double fp16_tflops = 0;  // dense, fp32 accumulation
  double memory_gbps = 0;
};
DatasheetPeaks datasheet_peaks(const std::string& name);

}  // namespace mpiasr
