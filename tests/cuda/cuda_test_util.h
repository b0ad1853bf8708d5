// Helpers of the CUDA tests: the skip without a device, one CudaBackend per
// test process, device arrays owned through the backend, half rounding on the
// host, and an element-wise closeness check that prints and reports the worst
// element.
//
// The same tests run on a GPU and, in the emulation build (MPIASR_CUDA_EMU),
// on the CPU through kernels/cuda_emu; kEmulated picks smaller sizes there.
#pragma once

#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <iomanip>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"

// Skips the current test, with the runtime's reason, when there is no usable device.
#define MPIASR_SKIP_WITHOUT_CUDA()                                                               \
  do {                                                                                           \
    const ::mpiasr::CudaDeviceCount mpiasr_devices_ = ::mpiasr::cuda_device_count();             \
    if (mpiasr_devices_.count == 0) GTEST_SKIP() << "no CUDA device: " << mpiasr_devices_.error; \
  } while (0)

namespace mpiasr::cuda_test {

#ifdef MPIASR_CUDA_EMU
constexpr bool kEmulated = true;
#else
constexpr bool kEmulated = false;
#endif

constexpr size_t kTestArenaBytes = kEmulated ? size_t(256) << 20 : size_t(1) << 30;

// The test process's backend on device 0, with a kTestArenaBytes arena.
inline CudaBackend& backend() {
  static CudaBackend instance(CudaBackendOptions{.arena_bytes = kTestArenaBytes});
  return instance;
}

// n elements of T in device memory from `be`, released with it.
template <typename T>
class DeviceArray {
 public:
  DeviceArray(CudaBackend& be, size_t n) : be_(&be), n_(n) {
    ptr_ = static_cast<T*>(be.alloc(std::max<size_t>(n, 1) * sizeof(T)));
  }
  ~DeviceArray() {
    if (ptr_) be_->release(ptr_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return ptr_; }
  size_t size() const { return n_; }

 private:
  CudaBackend* be_;
  size_t n_;
  T* ptr_ = nullptr;
};

inline std::vector<float> random_floats(size_t n, uint64_t seed, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> x(n);
  for (float& v : x) v = dist(rng);
  return x;
}

// x rounded to the nearest half and back: the values a half buffer holds.
inline std::vector<float> rounded_to_half(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = __half2float(__float2half_rn(x[i]));
  return out;
}

inline std::unique_ptr<DeviceArray<__half>> upload_half(CudaBackend& be,
                                                        const std::vector<float>& x) {
  auto array = std::make_unique<DeviceArray<__half>>(be, x.size());
  std::vector<__half> host(x.size());
  for (size_t i = 0; i < x.size(); ++i) host[i] = __float2half_rn(x[i]);
  be.to_device(array->get(), host.data(), host.size() * sizeof(__half));
  return array;
}

inline std::unique_ptr<DeviceArray<float>> upload_float(CudaBackend& be,
                                                        const std::vector<float>& x) {
  auto array = std::make_unique<DeviceArray<float>>(be, x.size());
  be.to_device(array->get(), x.data(), x.size() * sizeof(float));
  return array;
}

inline std::vector<float> download(CudaBackend& be, const __half* ptr, size_t n) {
  std::vector<__half> host(n);
  be.to_host(host.data(), ptr, n * sizeof(__half));
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = __half2float(host[i]);
  return out;
}

inline std::vector<float> download(CudaBackend& be, const float* ptr, size_t n) {
  std::vector<float> out(n);
  be.to_host(out.data(), ptr, n * sizeof(float));
  return out;
}

// Prints "[ worst    ] WHAT: MEASURE, P% of tolerance", the largest deviation a
// check saw as a share of what it allows; the GPU check's table
// (scripts/gpu-bundle/run.sh) shows the largest of each test.
inline void print_worst(const std::string& what, const std::string& measure, double share) {
  std::printf("[ worst    ] %s: %s, %.1f%% of tolerance\n", what.c_str(), measure.c_str(),
              100.0 * share);
}

// Every |actual - expected| <= atol + rtol |expected| (NaN fails); prints the
// worst element (print_worst), and a failure names it.
inline void expect_close(const std::vector<float>& actual, const std::vector<float>& expected,
                         double rtol, double atol, const std::string& what) {
  ASSERT_EQ(actual.size(), expected.size()) << what;
  double worst = 0.0;
  size_t worst_at = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double diff = std::abs(double(actual[i]) - double(expected[i]));
    double share = diff == 0.0 ? 0.0 : diff / (atol + rtol * std::abs(double(expected[i])));
    if (std::isnan(share)) share = INFINITY;
    if (share > worst) {
      worst = share;
      worst_at = i;
    }
  }
  if (actual.empty()) return;
  std::ostringstream measure;
  measure << std::setprecision(3) << "|gpu - cpu| "
          << std::abs(double(actual[worst_at]) - double(expected[worst_at])) << " at element "
          << worst_at << " (gpu " << actual[worst_at] << ", cpu " << expected[worst_at] << ")";
  print_worst(what, measure.str(), worst);
  EXPECT_LE(worst, 1.0) << what << ": element " << worst_at << " is " << actual[worst_at]
                        << ", expected " << expected[worst_at] << " (rtol " << rtol << ", atol "
                        << atol << ")";
}

}  // namespace mpiasr::cuda_test
