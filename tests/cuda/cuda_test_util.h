// Helpers of the CUDA tests: the skip without a device, one CudaBackend per
// activation type and test process, device arrays owned through a backend,
// rounding to the activation type on the host, tolerances per activation
// type, the typed suites over both types, and an element-wise closeness check
// that prints and reports the worst element.
//
// The same tests run on a GPU and, in the emulation build (MPIASR_CUDA_EMU),
// on the CPU through kernels/cuda_emu; kEmulated picks smaller sizes there.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iomanip>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cuda/cuda_backend.h"
#include "kernels/cuda/cuda_device.h"
#include "tests/base/random_floats.h"

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

// On the emulator, from now on queries of pending work answer as a GPU that
// keeps up does (never cudaErrorNotReady, kernels/cuda_emu/runtime.h): for
// tests that count the host waits the host code asks for, not those a device
// far behind would add.
inline void queries_answer_as_a_gpu_that_keeps_up() {
#ifdef MPIASR_CUDA_EMU
  emu::set_not_ready_percent(0);
#endif
}

// The activation types of the CUDA backend, for typed test suites:
//   MPIASR_CUDA_TYPED_SUITE(CudaCasts);  TYPED_TEST(CudaCasts, Name) { using Act = TypeParam; ... }
// runs Name as CudaCasts/0 (fp16) and CudaCasts/1 (bf16); ctest names them
// CudaCasts.Name<__half> and CudaCasts.Name<__nv_bfloat16>.
using ActTypes = ::testing::Types<__half, __nv_bfloat16>;
#define MPIASR_CUDA_TYPED_SUITE(suite)     \
  template <typename Act>                  \
  class suite : public ::testing::Test {}; \
  TYPED_TEST_SUITE(suite, ::mpiasr::cuda_test::ActTypes)

// |gpu - cpu| <= atol + rtol |cpu| for a value rounded once to Act: four unit
// roundoffs (fp16 2^-11, bf16 2^-8), covering one rounding plus float
// differences in the order of operations; atol the same for values of order
// 1 that cancel.
template <typename Act>
constexpr double kActRtol = std::is_same_v<Act, __half> ? 2e-3 : 1.6e-2;
template <typename Act>
constexpr double kActAtol = kActRtol<Act>;

// The test process's backend for Act on device 0, with a kTestArenaBytes arena.
template <typename Act>
CudaBackend<Act>& backend() {
  static CudaBackend<Act> instance(CudaBackendOptions{.arena_bytes = kTestArenaBytes});
  return instance;
}

// n elements of T in device memory from a backend, released with it.
template <typename T>
class DeviceArray {
 public:
  template <typename Be>
  DeviceArray(Be& be, size_t n) : release_([&be](void* p) { be.release(p); }), n_(n) {
    ptr_ = static_cast<T*>(be.alloc(std::max<size_t>(n, 1) * sizeof(T)));
  }
  ~DeviceArray() {
    if (ptr_) release_(ptr_);
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;

  T* get() const { return ptr_; }
  size_t size() const { return n_; }

 private:
  std::function<void(void*)> release_;
  size_t n_;
  T* ptr_ = nullptr;
};

// Host conversions between float and the activation types.
inline float host_float(__half x) {
  return __half2float(x);
}
inline float host_float(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <typename Act>
Act host_act(float x) {
  if constexpr (std::is_same_v<Act, __half>) {
    return __float2half_rn(x);
  } else {
    return __float2bfloat16_rn(x);
  }
}

using testing::random_floats;

// x rounded to the nearest Act and back: the values an Act buffer holds.
template <typename Act>
std::vector<float> rounded(const std::vector<float>& x) {
  std::vector<float> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = host_float(host_act<Act>(x[i]));
  return out;
}

// x in device memory as T (float, or rounded to the activation type).
template <typename T, typename Be>
std::unique_ptr<DeviceArray<T>> upload(Be& be, const std::vector<float>& x) {
  auto array = std::make_unique<DeviceArray<T>>(be, x.size());
  if constexpr (std::is_same_v<T, float>) {
    be.to_device(array->get(), x.data(), x.size() * sizeof(float));
  } else {
    std::vector<T> host(x.size());
    for (size_t i = 0; i < x.size(); ++i) host[i] = host_act<T>(x[i]);
    be.to_device(array->get(), host.data(), host.size() * sizeof(T));
  }
  return array;
}

template <typename Be>
std::unique_ptr<DeviceArray<float>> upload_float(Be& be, const std::vector<float>& x) {
  return upload<float>(be, x);
}

// n values of T from device memory, as float.
template <typename T, typename Be>
std::vector<float> download(Be& be, const T* ptr, size_t n) {
  std::vector<float> out(n);
  if constexpr (std::is_same_v<T, float>) {
    be.to_host(out.data(), ptr, n * sizeof(float));
  } else {
    std::vector<T> host(n);
    be.to_host(host.data(), ptr, n * sizeof(T));
    for (size_t i = 0; i < n; ++i) out[i] = host_float(host[i]);
  }
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
