// The peaks the CUDA benchmarks divide by: NVIDIA's datasheet figures by
// device name (dense fp16 tensor-core TFLOP/s with fp32 accumulation, HBM
// GB/s), the more specific name winning (an H100 PCIe is not an H100 SXM),
// and none for a device the table does not know. Needs no GPU.
#include "kernels/cuda/cuda_device.h"

#include <gtest/gtest.h>

namespace mpiasr {
namespace {

TEST(DatasheetPeaks, NamesAsTheRuntimeReportsThem) {
  struct Case {
    const char* name;
    double tflops, gbps;
  };
  const Case cases[] = {
      {"NVIDIA H200", 989.4, 4800},           {"NVIDIA H100 80GB HBM3", 989.4, 3350},
      {"NVIDIA H100 PCIe", 756.0, 2000},      {"NVIDIA H100 NVL", 835.0, 3900},
      {"NVIDIA A100-SXM4-80GB", 312.0, 2039}, {"NVIDIA A100-SXM4-40GB", 312.0, 1555},
      {"NVIDIA A100 80GB PCIe", 312.0, 1935}, {"NVIDIA A100-PCIE-40GB", 312.0, 1555},
  };
  for (const Case& c : cases) {
    const DatasheetPeaks peaks = datasheet_peaks(c.name);
    EXPECT_EQ(peaks.fp16_tflops, c.tflops) << c.name;
    EXPECT_EQ(peaks.memory_gbps, c.gbps) << c.name;
  }
}

TEST(DatasheetPeaks, AnUnknownDeviceHasNone) {
  for (const char* name : {"NVIDIA GeForce RTX 4090", "Tesla V100-SXM2-32GB", ""}) {
    EXPECT_EQ(datasheet_peaks(name).fp16_tflops, 0.0) << name;
    EXPECT_EQ(datasheet_peaks(name).memory_gbps, 0.0) << name;
  }
}

}  // namespace
}  // namespace mpiasr
