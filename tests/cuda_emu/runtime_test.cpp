// The CUDA runtime and cuBLASLt on the CPU (kernels/cuda_emu/runtime.h,
// cublas_lt.h): memory, copies and the checks on device ranges; devices;
// streams and events with their handle checks; the error codes and strings;
// and the matmuls with every epilogue against a column-major product, biases
// and sums computed in double from the definition.
#include <cublasLt.h>
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
  EXPECT_EQ(total, size_t(141) << 30);
  EXPECT_LE(free_before, emu::kDeviceBytes);
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
  EXPECT_EQ(std::string(prop.name), "NVIDIA H200");
  EXPECT_EQ(prop.major, 9);
  EXPECT_EQ(prop.minor, 0);
  EXPECT_EQ(prop.warpSize, 32);
  EXPECT_EQ(prop.maxThreadsPerBlock, 1024);
  EXPECT_EQ(prop.sharedMemPerBlock, size_t(48) << 10);
  EXPECT_EQ(prop.multiProcessorCount, 132);
  EXPECT_EQ(prop.totalGlobalMem, size_t(141) << 30);
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
  EXPECT_EQ(cudaEventSynchronize(start), cudaSuccess);  // a record takes the time when it runs
  std::this_thread::sleep_for(std::chrono::milliseconds(3));
  EXPECT_EQ(cudaEventRecord(end, non_blocking), cudaSuccess);
  EXPECT_EQ(cudaEventRecord(untimed), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(plain, end, 0), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(end), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(end), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(never), cudaSuccess);  // nothing recorded: nothing to wait for
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

// Device d's PCI bus id is 0000:(d + 1):00.0 (one device without
// MPIASR_EMU_DEVICES); a host function runs at its call on the legacy default
// stream, or at every launch of the graph it was captured into, when the
// stream's work runs.
TEST(EmulatedRuntime, BusIdsAndHostFunctions) {
  char bus_id[32] = {};
  EXPECT_EQ(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, 0), cudaSuccess);
  EXPECT_EQ(std::string(bus_id), "0000:01:00.0");
  EXPECT_EQ(cudaDeviceGetPCIBusId(bus_id, sizeof bus_id, 1), cudaErrorInvalidDevice);
  int calls = 0;
  const cudaHostFn_t count = [](void* data) { ++*static_cast<int*>(data); };
  EXPECT_EQ(cudaLaunchHostFunc(nullptr, count, &calls), cudaSuccess);
  EXPECT_EQ(calls, 1);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaLaunchHostFunc(stream, count, &calls), cudaSuccess);
  EXPECT_EQ(calls, 1);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(cudaLaunchHostFunc(stream, nullptr, &calls), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaLaunchHostFunc(stream, count, &calls), cudaErrorInvalidResourceHandle);
  (void)cudaGetLastError();
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
  EXPECT_STREQ(cublasLtGetStatusName(CUBLAS_STATUS_INVALID_VALUE), "CUBLAS_STATUS_INVALID_VALUE");
  EXPECT_STREQ(cublasLtGetStatusString(CUBLAS_STATUS_NOT_SUPPORTED),
               "the functionality requested is not supported");
}

// C = alpha op(A) op(B) + beta C, column-major, from the definition in double.
std::vector<double> reference_gemm(bool ta, bool tb, int m, int n, int k, double alpha,
                                   const std::vector<float>& A, int lda,
                                   const std::vector<float>& B, int ldb, double beta,
                                   const std::vector<float>& C, int ldc) {
  std::vector<double> out(C.begin(), C.end());
  for (int j = 0; j < n; ++j) {
    for (int i = 0; i < m; ++i) {
      double sum = 0.0;
      for (int p = 0; p < k; ++p) {
        const double a = A[size_t(ta ? i * lda + p : p * lda + i)];
        const double x = B[size_t(tb ? p * ldb + j : j * ldb + p)];
        sum += a * x;
      }
      double& c = out[size_t(j * ldc + i)];
      c = alpha * sum + (beta == 0.0 ? 0.0 : beta * c);
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

// The descriptors of one matmul, as kernels/cuda/gemm.cpp makes them.
struct Matmul {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t preference = nullptr;
  Matmul(bool ta, bool tb, int m, int n, int k, int lda, int ldb, int ldc, cudaDataType ab_type,
         cudaDataType c_type, cublasLtEpilogue_t epilogue, void* bias) {
    EXPECT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F),
              CUBLAS_STATUS_SUCCESS);
    const cublasOperation_t op_a = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t op_b = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    EXPECT_EQ(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSA, &op_a, sizeof(op_a)),
        CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(
        cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_TRANSB, &op_b, sizeof(op_b)),
        CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                             sizeof(epilogue)),
              CUBLAS_STATUS_SUCCESS);
    if (bias) {
      EXPECT_EQ(cublasLtMatmulDescSetAttribute(desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                                               sizeof(bias)),
                CUBLAS_STATUS_SUCCESS);
    }
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&a, ab_type, ta ? k : m, ta ? m : k, lda),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&b, ab_type, tb ? n : k, tb ? k : n, ldb),
              CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatrixLayoutCreate(&c, c_type, m, n, ldc), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(cublasLtMatmulPreferenceCreate(&preference), CUBLAS_STATUS_SUCCESS);
  }
  ~Matmul() {
    cublasLtMatmulPreferenceDestroy(preference);
    for (cublasLtMatrixLayout_t layout : {a, b, c}) cublasLtMatrixLayoutDestroy(layout);
    cublasLtMatmulDescDestroy(desc);
  }
  int algorithms(cublasLtHandle_t handle) const {
    cublasLtMatmulHeuristicResult_t result{};
    int found = -1;
    cublasLtMatmulAlgoGetHeuristic(handle, desc, a, b, c, c, preference, 1, &result, &found);
    return found;
  }
  cublasStatus_t run(cublasLtHandle_t handle, const float* alpha, const void* A, const void* B,
                     const float* beta, void* C, cudaStream_t stream) const {
    return cublasLtMatmul(handle, desc, alpha, A, a, B, b, beta, C, c, C, c, nullptr, nullptr, 0,
                          stream);
  }
};

// Every transpose, half and float C, every epilogue, padding rows (ldc > m)
// left alone, and beta = 0 ignoring what C held (NaN).
TEST(EmulatedCublasLt, MatmulsMatchTheColumnMajorDefinition) {
  cublasLtHandle_t handle = nullptr;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreate(&stream), cudaSuccess);
  const int m = 13, n = 9, k = 21;
  const cublasLtEpilogue_t epilogues[] = {CUBLASLT_EPILOGUE_DEFAULT, CUBLASLT_EPILOGUE_RELU,
                                          CUBLASLT_EPILOGUE_BIAS,    CUBLASLT_EPILOGUE_RELU_BIAS,
                                          CUBLASLT_EPILOGUE_BGRADA,  CUBLASLT_EPILOGUE_BGRADB};
  for (cublasLtEpilogue_t epilogue : epilogues) {
    for (bool ta : {false, true}) {
      for (bool tb : {false, true}) {
        for (bool half_c : {true, false}) {
          for (float beta : {0.0f, 0.5f}) {
            // The bias gradients' other forms have no algorithm (cublas_lt_test.cpp).
            if ((epilogue == CUBLASLT_EPILOGUE_BGRADA && ta) ||
                (epilogue == CUBLASLT_EPILOGUE_BGRADB && !tb)) {
              continue;
            }
            const int lda = (ta ? k : m) + 2, ldb = (tb ? n : k) + 1, ldc = m + 3;
            const std::vector<float> A = random_halves(size_t(lda) * (ta ? m : k), 1);
            const std::vector<float> B = random_halves(size_t(ldb) * (tb ? k : n), 2);
            std::vector<float> C = random_halves(size_t(ldc) * n, 3);
            if (beta == 0.0f) C[size_t(2 * ldc + 1)] = std::numeric_limits<float>::quiet_NaN();
            const std::vector<float> bias = random_halves(size_t(std::max(m, n)), 4);
            const float alpha = 0.75f;
            std::vector<double> expected =
                reference_gemm(ta, tb, m, n, k, alpha, A, lda, B, ldb, beta, C, ldc);
            const bool adds_bias =
                epilogue == CUBLASLT_EPILOGUE_BIAS || epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
            const bool relu =
                epilogue == CUBLASLT_EPILOGUE_RELU || epilogue == CUBLASLT_EPILOGUE_RELU_BIAS;
            for (int j = 0; j < n; ++j) {
              for (int i = 0; i < m; ++i) {
                double& value = expected[size_t(j * ldc + i)];
                if (adds_bias) value += bias[size_t(i)];
                if (relu) value = std::max(value, 0.0);
              }
            }
            // BGRADA: sums over k of op(A)'s rows; BGRADB: of op(B)'s columns.
            std::vector<double> sums;
            if (epilogue == CUBLASLT_EPILOGUE_BGRADA) {
              for (int i = 0; i < m; ++i) {
                double sum = 0.0;
                for (int p = 0; p < k; ++p) sum += A[size_t(ta ? i * lda + p : p * lda + i)];
                sums.push_back(sum);
              }
            }
            if (epilogue == CUBLASLT_EPILOGUE_BGRADB) {
              for (int j = 0; j < n; ++j) {
                double sum = 0.0;
                for (int p = 0; p < k; ++p) sum += B[size_t(tb ? p * ldb + j : j * ldb + p)];
                sums.push_back(sum);
              }
            }
            __half* dA = upload<__half>(A);
            __half* dB = upload<__half>(B);
            void* dC = half_c ? static_cast<void*>(upload<__half>(C)) : upload<float>(C);
            // A bias has C's type; a bias gradient is written in C's type.
            void* dbias = half_c ? static_cast<void*>(upload<__half>(bias)) : upload<float>(bias);
            const cudaDataType c_type = half_c ? CUDA_R_16F : CUDA_R_32F;
            const bool takes_vector = adds_bias || !sums.empty();
            const Matmul mm(ta, tb, m, n, k, lda, ldb, ldc, CUDA_R_16F, c_type, epilogue,
                            takes_vector ? dbias : nullptr);
            EXPECT_EQ(mm.algorithms(handle), 1);
            ASSERT_EQ(mm.run(handle, &alpha, dA, dB, &beta, dC, stream), CUBLAS_STATUS_SUCCESS);
            const std::vector<float> got = half_c ? download(static_cast<__half*>(dC), C.size())
                                                  : download(static_cast<float*>(dC), C.size());
            for (size_t i = 0; i < C.size(); ++i) {
              const bool inside = i % size_t(ldc) < size_t(m);
              if (!inside) {
                EXPECT_TRUE(std::isnan(C[i]) ? std::isnan(got[i]) : got[i] == C[i]) << i;
                continue;
              }
              // float sums in another order; half C: plus one rounding.
              const double tolerance = half_c ? 1e-3 * std::abs(expected[i]) + 1e-3 : 1e-5;
              ASSERT_NEAR(got[i], expected[i], tolerance)
                  << "epilogue " << epilogue << " ta " << ta << " tb " << tb << " half C " << half_c
                  << " beta " << beta << " element " << i;
            }
            const std::vector<float> vector =
                half_c ? download(static_cast<__half*>(dbias), bias.size())
                       : download(static_cast<float*>(dbias), bias.size());
            for (size_t i = 0; i < bias.size(); ++i) {
              if (i < sums.size()) {
                const double tolerance = half_c ? 1e-3 * std::abs(sums[i]) + 1e-3 : 1e-5;
                ASSERT_NEAR(vector[i], sums[i], tolerance) << "epilogue " << epilogue << " " << i;
              } else {
                EXPECT_EQ(vector[i], bias[i]) << "epilogue " << epilogue << " " << i;
              }
            }
            for (void* p : {static_cast<void*>(dA), static_cast<void*>(dB), dC, dbias}) {
              EXPECT_EQ(cudaFree(p), cudaSuccess);
            }
          }
        }
      }
    }
  }
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cublasLtDestroy(handle), CUBLAS_STATUS_SUCCESS);
}

TEST(EmulatedCublasLt, BadArgumentsGiveCublasStatuses) {
  cublasLtHandle_t handle = nullptr;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  __half* A = upload<__half>(std::vector<float>(64, 1.0f));
  float* C = upload<float>(std::vector<float>(64, 0.0f));
  const float one = 1.0f, zero = 0.0f;
  {
    const Matmul mm(false, false, 4, 4, 4, 4, 4, 4, CUDA_R_16F, CUDA_R_32F,
                    CUBLASLT_EPILOGUE_DEFAULT, nullptr);
    EXPECT_EQ(mm.run(handle, &one, A, A, &zero, C, nullptr), CUBLAS_STATUS_SUCCESS);
    EXPECT_EQ(download(C, 16), std::vector<float>(16, 4.0f));
    EXPECT_EQ(mm.run(nullptr, &one, A, A, &zero, C, nullptr), CUBLAS_STATUS_NOT_INITIALIZED);
    EXPECT_EQ(mm.algorithms(nullptr), 0);
    cudaStream_t destroyed = nullptr;
    ASSERT_EQ(cudaStreamCreate(&destroyed), cudaSuccess);
    ASSERT_EQ(cudaStreamDestroy(destroyed), cudaSuccess);
    EXPECT_EQ(mm.run(handle, &one, A, A, &zero, C, destroyed), CUBLAS_STATUS_INVALID_VALUE);
    // An attribute of the wrong size, and one the emulator does not model.
    const int32_t small = 0;
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(mm.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &small,
                                             sizeof(small)),
              CUBLAS_STATUS_INVALID_VALUE);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(mm.desc, cublasLtMatmulDescAttributes_t(9), &small,
                                             sizeof(small)),
              CUBLAS_STATUS_NOT_SUPPORTED);
    const cublasLtEpilogue_t dgelu = cublasLtEpilogue_t(192);
    EXPECT_EQ(cublasLtMatmulDescSetAttribute(mm.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, &dgelu,
                                             sizeof(dgelu)),
              CUBLAS_STATUS_NOT_SUPPORTED);
  }
  // A leading dimension shorter than the rows; fp32 inputs; a bias without its pointer.
  EXPECT_EQ(Matmul(false, false, 4, 4, 4, 3, 4, 4, CUDA_R_16F, CUDA_R_32F,
                   CUBLASLT_EPILOGUE_DEFAULT, nullptr)
                .run(handle, &one, A, A, &zero, C, nullptr),
            CUBLAS_STATUS_INVALID_VALUE);
  const Matmul fp32_inputs(false, false, 4, 4, 4, 4, 4, 4, CUDA_R_32F, CUDA_R_32F,
                           CUBLASLT_EPILOGUE_DEFAULT, nullptr);
  EXPECT_EQ(fp32_inputs.run(handle, &one, A, A, &zero, C, nullptr), CUBLAS_STATUS_NOT_SUPPORTED);
  EXPECT_EQ(fp32_inputs.algorithms(handle), 0);
  EXPECT_EQ(Matmul(false, false, 4, 4, 4, 4, 4, 4, CUDA_R_16F, CUDA_R_32F, CUBLASLT_EPILOGUE_BIAS,
                   nullptr)
                .run(handle, &one, A, A, &zero, C, nullptr),
            CUBLAS_STATUS_INVALID_VALUE);
  EXPECT_EQ(cublasLtDestroy(handle), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtDestroy(nullptr), CUBLAS_STATUS_NOT_INITIALIZED);
  EXPECT_EQ(cudaFree(A), cudaSuccess);
  EXPECT_EQ(cudaFree(C), cudaSuccess);
}

}  // namespace
}  // namespace mpiasr
