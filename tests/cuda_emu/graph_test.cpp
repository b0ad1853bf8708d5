// The emulated runtime's pinned memory, counts and CUDA graphs
// (kernels/cuda_emu/runtime.h): which calls count as launches and as host
// synchronizations (a copy to or from pageable host memory does, one from
// pinned memory does not); stream capture records kernels, copies, memsets and
// cuBLAS GEMMs instead of running them, with kernel arguments and GEMM scalars
// taken at capture and copy sources read at replay, and a graph replays them
// in order as often as launched; capture's rules: synchronizing or allocating
// while capturing fails and invalidates the capture, a forked stream must be
// joined back, a captured event cannot be waited on by the host.
#include <cublasLt.h>
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <vector>

#include "kernels/cuda/launch.h"

namespace mpiasr {
namespace {

__global__ void axpy_kernel(float* y, const float* x, float a, int n) {
  const int i = int(blockIdx.x * blockDim.x + threadIdx.x);
  if (i < n) y[i] += a * x[i];
}

template <typename T>
T* device_array(size_t n) {
  void* p = nullptr;
  EXPECT_EQ(cudaMalloc(&p, n * sizeof(T)), cudaSuccess);
  return static_cast<T*>(p);
}

TEST(EmulatedRuntimeCounts, PinnedCopiesDoNotBlockPageableOnesAndSynchronizationsDo) {
  float* device = device_array<float>(64);
  float* pinned = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&pinned), 64 * sizeof(float)), cudaSuccess);
  std::vector<float> pageable(64, 2.0f);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t event = nullptr;
  ASSERT_EQ(cudaEventCreate(&event), cudaSuccess);

  emu::set_not_ready_percent(0);  // the queries below run the work they ask about
  emu::reset_api_counts();
  for (int i = 0; i < 64; ++i) pinned[i] = float(i);
  EXPECT_EQ(cudaMemcpyAsync(device, pinned, 256, cudaMemcpyHostToDevice, stream), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(pinned + 1, device, 4, cudaMemcpyDeviceToHost, stream), cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(device + 32, device, 64, cudaMemcpyDeviceToDevice, stream),
            cudaSuccess);
  EXPECT_EQ(cudaMemsetAsync(device, 0, 4, stream), cudaSuccess);
  MPIASR_LAUNCH(axpy_kernel, 1, 64, 0, stream, device, device, 1.0f, 64);
  EXPECT_EQ(cudaEventRecord(event, stream), cudaSuccess);
  EXPECT_EQ(cudaEventQuery(event), cudaSuccess);
  EXPECT_EQ(cudaStreamQuery(stream), cudaSuccess);
  emu::ApiCounts counts = emu::api_counts();
  EXPECT_EQ(counts.copies, 3u);
  EXPECT_EQ(counts.memsets, 1u);
  EXPECT_EQ(counts.launches, 1u);
  EXPECT_EQ(counts.host_syncs(), 0u) << "pinned copies, queries and launches do not block";

  EXPECT_EQ(cudaMemcpyAsync(device, pageable.data(), 256, cudaMemcpyHostToDevice, stream),
            cudaSuccess);
  EXPECT_EQ(cudaMemcpyAsync(pageable.data(), device, 256, cudaMemcpyDeviceToHost, stream),
            cudaSuccess);
  EXPECT_EQ(cudaMemcpy(pinned, device, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(cudaMemcpy(device + 1, device, 4, cudaMemcpyDeviceToDevice), cudaSuccess);
  counts = emu::api_counts();
  EXPECT_EQ(counts.blocking_copies, 3u) << "two pageable async copies and one cudaMemcpy D2H";
  EXPECT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  EXPECT_EQ(cudaEventSynchronize(event), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  counts = emu::api_counts();
  EXPECT_EQ(counts.stream_syncs, 1u);
  EXPECT_EQ(counts.event_syncs, 1u);
  EXPECT_EQ(counts.device_syncs, 1u);
  EXPECT_EQ(counts.host_syncs(), 6u);
  emu::reset_api_counts();
  EXPECT_EQ(emu::api_counts().host_syncs(), 0u);

  EXPECT_EQ(cudaFreeHost(pageable.data()), cudaErrorInvalidValue);
  (void)cudaGetLastError();
  EXPECT_EQ(cudaFreeHost(pinned), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
  emu::set_not_ready_percent(25);
}

TEST(EmulatedGraphs, CaptureRecordsWorkThatEachGraphLaunchReplaysInOrder) {
  const int n = 100;
  float* x = device_array<float>(n);
  float* y = device_array<float>(n);
  float* input = nullptr;
  ASSERT_EQ(cudaMallocHost(reinterpret_cast<void**>(&input), n * sizeof(float)), cudaSuccess);
  for (int i = 0; i < n; ++i) input[i] = float(i);
  ASSERT_EQ(cudaMemset(y, 0, n * sizeof(float)), cudaSuccess);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);

  // y += 3 x with x uploaded from `input`, then y[0] = 0 (memset of 4 bytes).
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  EXPECT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  EXPECT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaErrorIllegalState);
  (void)cudaGetLastError();
  emu::reset_api_counts();
  EXPECT_EQ(cudaMemcpyAsync(x, input, n * sizeof(float), cudaMemcpyHostToDevice, stream),
            cudaSuccess);
  float a = 3.0f;
  MPIASR_LAUNCH(axpy_kernel, 2, 64, 0, stream, y, x, a, n);
  a = 100.0f;  // arguments were taken at the launch
  EXPECT_EQ(cudaMemsetAsync(y, 0, sizeof(float), stream), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  EXPECT_EQ(emu::api_counts().launches, 1u);
  size_t nodes = 0;
  EXPECT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 3u);
  std::vector<float> back(n);
  ASSERT_EQ(cudaMemcpy(back.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, std::vector<float>(n, 0.0f)) << "captured work does not run";

  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  emu::reset_api_counts();
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);   // the replay has read `input`
  for (int i = 0; i < n; ++i) input[i] = 2.0f * float(i);  // read by the next replay
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  const emu::ApiCounts counts = emu::api_counts();
  EXPECT_EQ(counts.graph_launches, 2u);
  EXPECT_EQ(counts.graph_nodes_run, 6u);
  EXPECT_EQ(counts.launches, 0u) << "replayed kernels are not host launches";
  EXPECT_EQ(counts.host_syncs(), 1u) << "the synchronization before the host rewrites the input";
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), y, n * sizeof(float), cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back[0], 0.0f);
  for (int i = 1; i < n; ++i) ASSERT_EQ(back[size_t(i)], 3.0f * i + 3.0f * 2.0f * i) << i;

  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaGraphLaunch(exec, stream), cudaErrorInvalidResourceHandle);
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorIllegalState);
  (void)cudaGetLastError();
  EXPECT_EQ(cudaFreeHost(input), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaFree(x), cudaSuccess);
  EXPECT_EQ(cudaFree(y), cudaSuccess);
}

TEST(EmulatedGraphs, SynchronizingOrAllocatingWhileCapturingInvalidatesTheCapture) {
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  float* device = device_array<float>(4);
  std::vector<float> pageable(4);
  using Call = std::function<cudaError_t()>;
  const std::vector<std::pair<const char*, Call>> forbidden = {
      {"cudaStreamSynchronize", [&] { return cudaStreamSynchronize(stream); }},
      {"cudaDeviceSynchronize", [&] { return cudaDeviceSynchronize(); }},
      {"cudaMalloc",
       [&] {
         void* p = nullptr;
         return cudaMalloc(&p, 16);
       }},
      {"cudaMemcpy",
       [&] { return cudaMemcpy(device, pageable.data(), 4, cudaMemcpyHostToDevice); }},
      {"pageable cudaMemcpyAsync",
       [&] { return cudaMemcpyAsync(device, pageable.data(), 4, cudaMemcpyHostToDevice, stream); }},
  };
  for (const auto& [name, call] : forbidden) {
    ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
    EXPECT_EQ(call(), cudaErrorStreamCaptureUnsupported) << name;
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    EXPECT_EQ(cudaStreamIsCapturing(stream, &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusInvalidated) << name;
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaErrorStreamCaptureInvalidated) << name;
    EXPECT_EQ(graph, nullptr);
    (void)cudaGetLastError();
  }
  // The relaxed mode allows allocation; syncing the capturing stream never.
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed), cudaSuccess);
  void* allowed = nullptr;
  EXPECT_EQ(cudaMalloc(&allowed, 16), cudaSuccess);
  cudaGraph_t graph = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaFree(allowed), cudaSuccess);
  EXPECT_EQ(cudaFree(device), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
}

TEST(EmulatedGraphs, AForkedStreamMustBeJoinedBack) {
  cudaStream_t origin = nullptr, side = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&origin, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t fork = nullptr, join = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), cudaSuccess);
  float* y = device_array<float>(64);
  float* x = device_array<float>(64);
  ASSERT_EQ(cudaMemset(x, 0, 256), cudaSuccess);
  ASSERT_EQ(cudaMemset(y, 0, 256), cudaSuccess);

  for (bool joined : {false, true}) {
    ASSERT_EQ(cudaStreamBeginCapture(origin, cudaStreamCaptureModeGlobal), cudaSuccess);
    MPIASR_LAUNCH(axpy_kernel, 1, 64, 0, origin, y, x, 1.0f, 64);
    ASSERT_EQ(cudaEventRecord(fork, origin), cudaSuccess);
    EXPECT_EQ(cudaEventQuery(fork), cudaErrorCapturedEvent);
    EXPECT_EQ(cudaEventSynchronize(fork), cudaErrorCapturedEvent);
    (void)cudaGetLastError();
    ASSERT_EQ(cudaStreamWaitEvent(side, fork, 0), cudaSuccess);
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    EXPECT_EQ(cudaStreamIsCapturing(side, &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusActive) << "the side stream joined the capture";
    EXPECT_EQ(cudaMemsetAsync(x, 0, 4, side), cudaSuccess);
    if (joined) {
      ASSERT_EQ(cudaEventRecord(join, side), cudaSuccess);
      ASSERT_EQ(cudaStreamWaitEvent(origin, join, 0), cudaSuccess);
    }
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(origin, &graph),
              joined ? cudaSuccess : cudaErrorStreamCaptureUnjoined);
    EXPECT_EQ(cudaStreamIsCapturing(side, &status), cudaSuccess);
    EXPECT_EQ(status, cudaStreamCaptureStatusNone);
    if (joined) {
      size_t nodes = 0;
      EXPECT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
      EXPECT_EQ(nodes, 2u);
      EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
    }
    (void)cudaGetLastError();
  }
  EXPECT_EQ(cudaStreamEndCapture(side, nullptr), cudaErrorInvalidValue);
  (void)cudaGetLastError();
  for (cudaEvent_t event : {fork, join}) EXPECT_EQ(cudaEventDestroy(event), cudaSuccess);
  for (cudaStream_t stream : {origin, side}) EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cudaFree(x), cudaSuccess);
  EXPECT_EQ(cudaFree(y), cudaSuccess);
}

// A captured matmul keeps the alpha it was called with and reads its inputs at replay.
TEST(EmulatedGraphs, CublasLtMatmulsAreCapturedWithTheirScalars) {
  cublasLtHandle_t handle = nullptr;
  ASSERT_EQ(cublasLtCreate(&handle), CUBLAS_STATUS_SUCCESS);
  cudaStream_t stream = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), cudaSuccess);
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, c = nullptr;
  ASSERT_EQ(cublasLtMatmulDescCreate(&desc, CUBLAS_COMPUTE_32F, CUDA_R_32F), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&a, CUDA_R_16F, 2, 2, 2), CUBLAS_STATUS_SUCCESS);
  ASSERT_EQ(cublasLtMatrixLayoutCreate(&c, CUDA_R_32F, 2, 2, 2), CUBLAS_STATUS_SUCCESS);
  __half* A = device_array<__half>(4);
  float* C = device_array<float>(4);
  const std::vector<__half> ones(4, __half(1.0f)), twos(4, __half(2.0f));
  ASSERT_EQ(cudaMemcpy(A, ones.data(), 8, cudaMemcpyHostToDevice), cudaSuccess);
  float alpha = 0.5f, beta = 0.0f;
  emu::reset_api_counts();
  ASSERT_EQ(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cublasLtMatmul(handle, desc, &alpha, A, a, A, a, &beta, C, c, C, c, nullptr, nullptr, 0,
                           stream),
            CUBLAS_STATUS_SUCCESS);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream, &graph), cudaSuccess);
  EXPECT_EQ(emu::api_counts().launches, 1u);
  alpha = 10.0f;
  ASSERT_EQ(cudaMemcpy(A, twos.data(), 8, cudaMemcpyHostToDevice), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream), cudaSuccess);
  std::vector<float> back(4);
  ASSERT_EQ(cudaStreamSynchronize(stream), cudaSuccess);
  ASSERT_EQ(cudaMemcpy(back.data(), C, 16, cudaMemcpyDeviceToHost), cudaSuccess);
  EXPECT_EQ(back, std::vector<float>(4, 0.5f * 2 * 2 * 2)) << "alpha 0.5, inputs 2 at replay";
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaFree(A), cudaSuccess);
  EXPECT_EQ(cudaFree(C), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(stream), cudaSuccess);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(a), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatrixLayoutDestroy(c), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtMatmulDescDestroy(desc), CUBLAS_STATUS_SUCCESS);
  EXPECT_EQ(cublasLtDestroy(handle), CUBLAS_STATUS_SUCCESS);
}

}  // namespace
}  // namespace mpiasr
