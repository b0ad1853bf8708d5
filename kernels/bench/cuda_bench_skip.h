// How the CUDA benchmarks start: main registers its benchmarks before it
// touches a device, so --benchmark_list_tests lists them on any machine (one
// without a GPU can check that they start); without a usable CUDA device they
// print "NAME: SKIP (no CUDA device: WHY)". Either way main then returns 0.
#pragma once

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <string_view>

#include "kernels/cuda/cuda_device.h"

namespace mpiasr {

// Whether the command line asks for the list only (look before
// benchmark::Initialize, which removes the flags it knows).
inline bool benchmark_list_requested(int argc, char** argv) {
  return std::any_of(argv + 1, argv + argc, [](const char* arg) {
    const std::string_view flag(arg);
    return flag == "--benchmark_list_tests" || flag == "--benchmark_list_tests=true";
  });
}

// After benchmark::Initialize and the registrations: lists the benchmarks
// when asked to, or prints the SKIP line when there is no device, and then
// returns true (main returns 0); returns false when the benchmarks are to run.
inline bool list_or_skip(const char* name, bool list_requested) {
  if (list_requested) {
    benchmark::RunSpecifiedBenchmarks();
    return true;
  }
  const CudaDeviceCount devices = cuda_device_count();
  if (devices.count > 0) return false;
  std::printf("%s: SKIP (no CUDA device: %s)\n", name, devices.error.c_str());
  return true;
}

}  // namespace mpiasr
