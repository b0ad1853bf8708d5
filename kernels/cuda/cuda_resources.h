// RAII owners of CUDA handles: a stream, an event, pinned host memory, an
// instantiated graph and a cuBLASLt handle. Each creates its handle in the constructor (checked),
// destroys it in the destructor (errors there are ignored: a destructor must not throw, and a
// failing device has already reported through the calls that used it), and
// is movable but not copyable.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>

#include <utility>

#include "kernels/cuda/call_counts.h"
#include "kernels/cuda/cuda_check.h"

namespace mpiasr {

// A non-blocking stream: it does not synchronize with the legacy default stream.
class CudaStream {
 public:
  CudaStream() { CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~CudaStream() {
    if (stream_) (void)cudaStreamDestroy(stream_);
  }
  CudaStream(CudaStream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}
  CudaStream& operator=(CudaStream&& other) noexcept {
    std::swap(stream_, other.stream_);
    return *this;
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cudaStream_t get() const { return stream_; }
  // The host waits for the stream (counted: kernels/cuda/call_counts.h).
  void synchronize() const {
    cuda_detail::count_host_wait();
    CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

 private:
  cudaStream_t stream_ = nullptr;
};

// An event without timing (cheapest to record and wait on) unless timing is asked for.
class CudaEvent {
 public:
  explicit CudaEvent(bool timing = false) {
    CUDA_CHECK(
        cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~CudaEvent() {
    if (event_) (void)cudaEventDestroy(event_);
  }
  CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&& other) noexcept {
    std::swap(event_, other.event_);
    return *this;
  }
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream) const { CUDA_CHECK(cudaEventRecord(event_, stream)); }
  // Makes `stream` wait (on the device) until this event's work is done.
  void wait_on(cudaStream_t stream) const { CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0)); }
  // Whether the recorded work is done; never blocks.
  bool done() const {
    const cudaError_t status = cudaEventQuery(event_);
    if (status == cudaErrorNotReady) return false;
    CUDA_CHECK(status);
    return true;
  }
  // Returns once the recorded work is done: at once when it is (a query),
  // else the host waits (counted: kernels/cuda/call_counts.h).
  void wait() const {
    if (done()) return;
    cuda_detail::count_host_wait();
    CUDA_CHECK(cudaEventSynchronize(event_));
  }
  // Milliseconds between `start` and this event (both recorded with timing).
  float elapsed_ms_since(const CudaEvent& start) const {
    float ms = 0.0f;
    CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
    return ms;
  }

 private:
  cudaEvent_t event_ = nullptr;
};

// Page-locked host memory (cudaHostAlloc): copies from and to it run
// asynchronously, where pageable memory makes the host wait.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  explicit PinnedBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes > 0) CUDA_CHECK(cudaHostAlloc(&data_, bytes, cudaHostAllocDefault));
  }
  ~PinnedBuffer() {
    if (data_) (void)cudaFreeHost(data_);
  }
  PinnedBuffer(PinnedBuffer&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}
  PinnedBuffer& operator=(PinnedBuffer&& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(bytes_, other.bytes_);
    return *this;
  }
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;

  char* data() const { return static_cast<char*>(data_); }
  size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// An instantiated CUDA graph, made from what a stream's capture recorded.
class CudaGraphExec {
 public:
  CudaGraphExec() = default;
  // Ends the capture begun on `stream` and instantiates the graph it recorded.
  static CudaGraphExec end_capture(cudaStream_t stream) {
    cudaGraph_t graph = nullptr;
    CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    CudaGraphExec exec;
    const cudaError_t status = cudaGraphInstantiate(&exec.exec_, graph, 0);
    (void)cudaGraphDestroy(graph);
    CUDA_CHECK(status);
    return exec;
  }
  ~CudaGraphExec() {
    if (exec_) (void)cudaGraphExecDestroy(exec_);
  }
  CudaGraphExec(CudaGraphExec&& other) noexcept : exec_(std::exchange(other.exec_, nullptr)) {}
  CudaGraphExec& operator=(CudaGraphExec&& other) noexcept {
    std::swap(exec_, other.exec_);
    return *this;
  }
  CudaGraphExec(const CudaGraphExec&) = delete;
  CudaGraphExec& operator=(const CudaGraphExec&) = delete;

  // Queues the graph's work on `stream` (counted: kernels/cuda/call_counts.h).
  void launch(cudaStream_t stream) const {
    cuda_detail::count_graph_launch();
    CUDA_CHECK(cudaGraphLaunch(exec_, stream));
  }

 private:
  cudaGraphExec_t exec_ = nullptr;
};

class CublasLtHandle {
 public:
  CublasLtHandle() { CUBLAS_CHECK(cublasLtCreate(&handle_)); }
  ~CublasLtHandle() {
    if (handle_) (void)cublasLtDestroy(handle_);
  }
  CublasLtHandle(CublasLtHandle&& other) noexcept
      : handle_(std::exchange(other.handle_, nullptr)) {}
  CublasLtHandle& operator=(CublasLtHandle&& other) noexcept {
    std::swap(handle_, other.handle_);
    return *this;
  }
  CublasLtHandle(const CublasLtHandle&) = delete;
  CublasLtHandle& operator=(const CublasLtHandle&) = delete;

  cublasLtHandle_t get() const { return handle_; }

 private:
  cublasLtHandle_t handle_ = nullptr;
};

}  // namespace mpiasr
