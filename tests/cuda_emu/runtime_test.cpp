// The CUDA runtime and cuBLAS on the CPU (kernels/cuda_emu/runtime.h,
// cublas.h): memory, copies and the checks on device ranges; devices; streams
// and events with their handle checks; the error codes and strings; and the
// GEMMs against a column-major product computed in double from the definition.
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace mpiasr {
namespace {

TEST(EmulatedRuntime, MemoryCopiesAndDeviceRangeChecks) {
  ASSERT_EQ(cudaGetLastError(), cudaSuccess);
  size_t free_before = 0, total = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_before, &total), cudaSuccess);
  EXPECT_EQ(total, emu::kDeviceBytes);
  void* a = nullptr;
  void* b = nullptr;
  ASSERT_EQ(cudaMalloc(&a, 1000), cudaSuccess);
  ASSERT_EQ(cudaMalloc(&b, 1000), cudaSuccess);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(a) % 256, 0u);
  size_t free_after = 0;
  ASSERT_EQ(cudaMemGetInfo(&free_after, &total), cudaSuccess);
  EXPECT_EQ(free_before - free_after, 2000u);

  std::vector<unsigned char> host(1000), back(1000);
  for (size_t i = 0; i < host.size(); ++i) host[i] = static_cast<unsigned char>(i * 7);
  EXPECT_EQ(cudaMemcpy(a, host.data(), 1000, cudaMemcpyHostToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(b, a, 1000, cudaMemcpyDeviceToDevice), cudaSuccess);
  EXPECT_EQ(cudaMemset(static_cast<char*>(b) + 100, 0xAB, 50), cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(b, 0x01, 10, nullptr), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(back.data(), b, 1000, cudaMemcpyDeviceToHost), cudaSuccess);
  for (size_t i = 0; i < 1000; ++i) {
    const unsigned char expected = i < 10 ? 0x01 : (i >= 100 && i < 150 ? 0xAB : host[i]);
    ASSERT_EQ(back[i], expected) << i;
  }

  // Device sides outside every allocation, or past the end of one.
  EXPECT_EQ(cudaMemcpy(host.data(), back.data(), 10, cudaMemcpyHostToDevice),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaPeekAtLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(back.data(), static_cast<char*>(a) + 999, 2, cudaMemcpyDeviceToHost),
            cudaErrorInvalidValue);
  EXPECT_EQ(cudaMemset(host.data(), 0, 4), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(host.data()), cudaErrorInvalidValue);
  void* huge = nullptr;
  EXPECT_EQ(cudaMalloc(&huge, emu::kDeviceBytes), cudaErrorMemoryAllocation);
  void* empty = &huge;
  EXPECT_EQ(cudaMalloc(&empty, 0), cudaSuccess);
  EXPECT_EQ(empty, nullptr);
  EXPECT_EQ(cudaFree(a), cudaSuccess);
  EXPECT_EQ(cudaFree(b), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(back.data(), a, 1, cudaMemcpyDeviceToHost), cudaErrorInvalidValue);
  (void)cudaGetLastError();
}

TEST(EmulatedRuntime, OneDeviceWithItsProperties) {
  int count = 0, device = -1;
  EXPECT_EQ(cudaGetDeviceCount(&count), cudaSuccess);
  EXPECT_EQ(count, 1);
  EXPECT_EQ(cudaSetDevice(0), cudaSuccess);
  EXPECT_EQ(cudaGetDevice(&device), cudaSuccess);
  EXPECT_EQ(device, 0);
  EXPECT_EQ(cudaSetDevice(1), cudaErrorInvalidDevice);
  cudaDeviceProp prop{};
  EXPECT_EQ(cudaGetDeviceProperties(&prop, 0), cudaSuccess);
  EXPECT_EQ(std::string(prop.name), "mpiasr SIMT emulator (CPU)");
  EXPECT_EQ(prop.major, 8);
  EXPECT_EQ(prop.minor, 0);
  EXPECT_EQ(prop.warpSize, 32);
  EXPECT_EQ(prop.maxThreadsPerBlock, 1024);
  EXPECT_EQ(prop.sharedMemPerBlock, size_t(48) << 10);
  EXPECT_EQ(prop.totalGlobalMem, emu::kDeviceBytes);
  EXPECT_EQ(cudaGetDeviceProperties(&prop, 1), cudaErrorInvalidDevice);
  int value = -1;
  EXPECT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrClockRate, 0), cudaSuccess);
  EXPECT_EQ(value, 0);
  EXPECT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrMemoryClockRate, 0), cudaSuccess);
  EXPECT_EQ(cudaDeviceGetAttribute(&value, cudaDevAttrGlobalMemoryBusWidth, 0), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  (void)cudaGetLastError();
}

TEST(EmulatedRuntime, StreamsAndEventsCheckTheirHandles) {
  cudaStream_t plain = nullptr, non_blocking = nullptr;
  ASSERT_EQ(cudaStreamCreate(&plain), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&non_blocking, cudaStreamNonBlocking), cudaSuccess);
  cudaStream_t bad = nullptr;
  EXPECT_EQ(cudaStreamCreateWithFlags(&bad, 0x80), cudaErrorInvalidValue);
  cudaEvent_t start = nullptr, end = nullptr, untimed = nullptr, never = nullptr;
  ASSERT_EQ(cudaEventCreate(&start), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&end, cudaEventDefault), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&untimed, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventCreate(&never), cudaSuccess);

  EXPECT_EQ(cudaEventRecord(start, plain), cudaSuccess);
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  EXPECT_EQ(cudaEventRecord(end, non_blocking), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(untimed), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(plain, end, 0), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(end), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(never), cudaSuccess);  // nothing recorded: nothing to wait for
  EXPECT_EQ(cudaEventSynchronize(end), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(plain), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(non_blocking), cudaSuccess);
  float ms = -1.0f;
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, end), cudaSuccess);
  EXPECT_GE(ms, 3.0f);  // at least the sleep between the two records
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, untimed), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventElapsedTime(&ms, start, never), cudaErrorInvalidResourceHandle);

  EXPECT_EQ(cudaStreamDestroy(plain), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(plain), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamSynchronize(plain), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaEventRecord(start, plain), cudaErrorInvalidResourceHandle);
  char byte = 0;
  void* device = nullptr;
  ASSERT_EQ(cudaMalloc(&device, 1), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(device, &byte, 1, cudaMemcpyHostToDevice, plain),
            cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(non_blocking), cudaSuccess);
  for (cudaEvent_t event : {start, end, untimed, never}) {
    EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
  }
  EXPECT_EQ(cudaEventQuery(start), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamWaitEvent(nullptr, start, 0), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidResourceHandle);
}

TEST(EmulatedRuntime, ErrorNamesAndStringsAreCudas) {
  EXPECT_STREQ(cudaGetErrorName(cudaSuccess), "cudaSuccess");
  EXPECT_STREQ(cudaGetErrorString(cudaSuccess), "no error");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorInvalidValue), "cudaErrorInvalidValue");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidValue), "invalid argument");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorMemoryAllocation), "cudaErrorMemoryAllocation");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorMemoryAllocation), "out of memory");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidDevice), "invalid device ordinal");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorInvalidResourceHandle), "invalid resource handle");
  EXPECT_STREQ(cudaGetErrorName(cudaErrorNotReady), "cudaErrorNotReady");
  EXPECT_STREQ(cudaGetErrorString(cudaErrorNotReady), "device not ready");
  EXPECT_STREQ(cublasGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_STREQ(cublasGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED),
               "the functionality requested is not supported");
}

// C[b] = alpha op(A[b]) op(B[b]) + beta C[b], column-major, from the definition in double.
std::vector<double> reference_gemm(bool ta, bool tb, int m, int n, int k, double alpha,
                                   const std::vector<float>& A, int lda, long long sa,
                                   const std::vector<float>& B, int ldb, long long sb, double beta,
                                   const std::vector<float>& C, int ldc, long long sc, int batch) {
  std::vector<double> out(C.begin(), C.end());
  for (int b = 0; b < batch; ++b) {
    for (int j = 0; j < n; ++j) {
      for (int i = 0; i < m; ++i) {
        double sum = 0.0;
        for (int p = 0; p < k; ++p) {
          const double a = A[size_t(b * sa + (ta ? i * lda + p : p * lda + i))];
          const double x = B[size_t(b * sb + (tb ? p * ldb + j : j * ldb + p))];
          sum += a * x;
        }
        double& c = out[size_t(b * sc + j * ldc + i)];
        c = alpha * sum + (beta == 0.0 ? 0.0 : beta * c);
      }
    }
  }
  return out;
}

std::vector<float> random_halves(size_t n, uint32_t seed) {
  std::mt19937 random(seed);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<float> x(n);
  for (float& v : x) v = __half2float(__float2half_rn(uniform(random)));
  return x;
}

template <typename T>
T* upload(const std::vector<float>& x) {
  std::vector<T> host(x.size());
  for (size_t i = 0; i < x.size(); ++i) host[i] = T(x[i]);
  void* device = nullptr;
  EXPECT_EQ(cudaMalloc(&device, host.size() * sizeof(T)), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(device, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
            cudaSuccess);
  return static_cast<T*>(device);
}

template <typename T>
std::vector<float> download(const T* device, size_t n) {
  std::vector<T> host(n);
  EXPECT_EQ(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost), cudaSuccess);
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = float(host[i]);
  return out;
}

// Every transpose, half and float C, strides with gaps, padding rows (ldc > m)
// left alone, and beta = 0 ignoring what C held (NaN).
TEST(EmulatedCublas, GemmsMatchTheColumnMajorDefinition) {
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  EXPECT_EQ(cublasSetStream(handle, stream), CUBLAS_STATUS_SUCCESS);
  const int m = 13, n = 9, k = 21, batch = 3;
  for (bool ta : {false, true}) {
    for (bool tb : {false, true}) {
      for (bool half_c : {true, false}) {
        for (float beta : {0.0f, 0.5f}) {
          const int lda = (ta ? k : m) + 2, ldb = (tb ? n : k) + 1, ldc = m + 3;
          const long long sa = (long long)lda * (ta ? m : k) + 5;
          const long long sb = (long long)ldb * (tb ? k : n) + 7;
          const long long sc = (long long)ldc * n + 4;
          const std::vector<float> A = random_halves(size_t(sa * batch), 1);
          const std::vector<float> B = random_halves(size_t(sb * batch), 2);
          std::vector<float> C = random_halves(size_t(sc * batch), 3);
          if (beta == 0.0f) C[size_t(2 * ldc + 1)] = std::numeric_limits<float>::quiet_NaN();
          const float alpha = 0.75f;
          const std::vector<double> expected = reference_gemm(ta, tb, m, n, k, alpha, A, lda, sa, B,
                                                              ldb, sb, beta, C, ldc, sc, batch);
          __half* dA = upload<__half>(A);
          __half* dB = upload<__half>(B);
          void* dC = half_c ? static_cast<void*>(upload<__half>(C)) : upload<float>(C);
          const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
          const cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
          const cudaDataType c_type = half_c ? CUDA_R_16F : CUDA_R_32F;
          ASSERT_EQ(
              cublasGemmStridedBatchedEx(handle, op_a, op_b, m, n, k, &alpha, dA, CUDA_R_16F, lda,
                                         sa, dB, CUDA_R_16F, ldb, sb, &beta, dC, c_type, ldc, sc,
                                         batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
              CUBLAS_STATUS_SUCCESS);
          const std::vector<float> got = half_c ? download(static_cast<__half*>(dC), C.size())
                                                : download(static_cast<float*>(dC), C.size());
          for (size_t i = 0; i < C.size(); ++i) {
            const long long in_batch = (long long)i % sc;
            const bool inside = in_batch < (long long)ldc * n && in_batch % ldc < m;
            if (!inside) {
              EXPECT_TRUE(std::isnan(C[i]) ? std::isnan(got[i]) : got[i] == C[i]) << i;
              continue;
            }
            // float sums in another order; half C: plus one rounding.
            const double tolerance = half_c ? 1e-3 * std::abs(expected[i]) + 1e-3 : 1e-5;
            ASSERT_NEAR(got[i], expected[i], tolerance)
                << "ta " << ta << " tb " << tb << " half C " << half_c << " beta " << beta
                << " element " << i;
          }
          // The first matrix alone, through cublasGemmEx.
          void* single = half_c ? static_cast<void*>(upload<__half>(C)) : upload<float>(C);
          ASSERT_EQ(cublasGemmEx(handle, op_a, op_b, m, n, k, &alpha, dA, CUDA_R_16F, lda, dB,
                                 CUDA_R_16F, ldb, &beta, single, c_type, ldc, CUBLAS_COMPUTE_32F,
                                 CUBLAS_GEMM_DEFAULT),
                    CUBLAS_STATUS_SUCCESS);
          const std::vector<float> first = half_c
                                               ? download(static_cast<__half*>(single), size_t(sc))
                                               : download(static_cast<float*>(single), size_t(sc));
          for (size_t i = 0; i < size_t(sc); ++i) {
            EXPECT_TRUE(first[i] == got[i] || (std::isnan(first[i]) && std::isnan(got[i]))) << i;
          }
          for (void* p : {static_cast<void*>(dA), static_cast<void*>(dB), dC, single}) {
            EXPECT_EQ(cudaFree(p), cudaSuccess);
          }
        }
      }
    }
  }
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
}

TEST(EmulatedCublas, BadArgumentsGiveCublasStatuses) {
  cublasHandle_t handle = nullptr;
  ASSERT_EQ(cublasCreate(&handle), CUBLAS_STATUS_SUCCESS);
  __half* A = upload<__half>(std::vector<float>(64, 1.0f));
  float* C = upload<float>(std::vector<float>(64, 0.0f));
  const float one = 1.0f, zero = 0.0f;
  auto gemm = [&](cublasHandle_t h, int lda, cudaDataType a_type, cublasComputeType_t compute) {
    return cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, 4, 4, 4, &one, A, a_type, lda, A, CUDA_R_16F,
                        4, &zero, C, CUDA_R_32F, 4, compute, CUBLAS_GEMM_DEFAULT);
  };
  EXPECT_EQ(gemm(handle, 4, CUDA_R_16F, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(download(C, 16), std::vector<float>(16, 4.0f));
  EXPECT_EQ(gemm(nullptr, 4, CUDA_R_16F, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(gemm(handle, 3, CUDA_R_16F, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(gemm(handle, 4, CUDA_R_32F, CUBLAS_COMPUTE_32F), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(gemm(handle, 4, CUDA_R_16F, cublasComputeType_t(64)), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(cublasSetWorkspace(handle, nullptr, 256), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasSetWorkspace(handle, C, 256), CUBLAS_STATUS_SUCCESS);
  cudaStream_t destroyed = nullptr;
  ASSERT_EQ(cudaStreamCreate(&destroyed), cudaSuccess);
  ASSERT_EQ(cudaStreamDestroy(destroyed), cudaSuccess);
  EXPECT_EQ(cublasSetStream(handle, destroyed), CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasDestroy(handle), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasDestroy(nullptr), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cudaFree(A), cudaSuccess);
  EXPECT_EQ(cudaFree(C), cudaSuccess);
}

}  // namespace
}  // namespace mpiasr
