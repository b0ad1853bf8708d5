// The CUDA runtime API on the CPU, for the emulation build (MPIASR_CUDA_EMU;
// kernels/cuda_emu/include/cuda_runtime.h includes this): the calls the
// project makes, with CUDA's names, types, error codes and error strings.
//
//   device      one device, 0, or MPIASR_EMU_DEVICES of them (1 to 64), each
//               presenting itself as the GPU the project targets, an H200
//               (kPresentedName, compute capability 9.0, 132 SMs,
//               kPresentedBytes of memory), with 48 KiB of shared memory per
//               block and 1024 threads per block; of that memory only
//               kDeviceBytes can be allocated (one budget for the process,
//               whichever device it picks), and cudaMemGetInfo reports the
//               rest as in use; its clocks and bus width read 0 (nothing is
//               timed); the runtime and driver versions read 0 (no CUDA
//               release). Device d's PCI bus id is 0000:(d + 1, hex):00.0 in
//               every process, so two processes that pick the same device
//               number share a "GPU"
//   memory      cudaMalloc is host memory (the ASan heap, so overruns of a
//               whole allocation are caught), filled with 0xFF bytes and
//               watched by initcheck (memory_check.h); device pointers and host
//               pointers are the same kind, and a copy's device side must lie
//               in a live allocation, else cudaErrorInvalidValue.
//               cudaMallocHost / cudaHostAlloc give pinned host memory, kept
//               in a registry of their own: a copy between the device and
//               host memory that is not pinned makes the host wait on a GPU
//               (a pageable cudaMemcpyAsync is staged synchronously), so it
//               is counted as a host synchronization here (the host waits
//               for the copy). While a copy into or out of pinned memory is
//               queued, a host access of its pages is reported
//               (pinned_guard.h)
//   streams     each stream has a queue: kernels, cuBLASLt matmuls, async
//               copies and memsets, host functions (cudaLaunchHostFunc; the
//               emulated NCCL's collectives are ones), graph launches,
//               event records and waits on events are queued and return at
//               once. Queued work runs at a synchronizing call
//               (cudaStreamSynchronize, cudaEventSynchronize,
//               cudaDeviceSynchronize, cudaMemcpy, cudaFree, cudaFreeHost, a
//               pageable cudaMemcpyAsync, a query): the work the call waits
//               for and what that work waits for, nothing else, one piece at
//               a time in a random order (seeded by schedule_seed(), simt.h)
//               that keeps each stream's order and the events waited on, so
//               work on two streams is ordered only by an event. A query
//               (cudaStreamQuery, cudaEventQuery) of work not yet run
//               answers cudaErrorNotReady in not_ready_percent of the cases,
//               after running up to 3 pieces of that work; otherwise it runs
//               the work and answers cudaSuccess. The legacy default
//               stream (null) waits for the blocking streams' work queued
//               before (cudaStreamCreate; the project's streams are
//               non-blocking) and runs its work before the call returns, so
//               the host never gets ahead of it (cudaMemset, and the
//               emulator's tests, which launch there and read the results at
//               once). A failing kernel throws from the call that runs it. A
//               stream must have been created and not destroyed; work queued
//               on a destroyed stream still runs
//   events      a record is queued work that stamps the host time when it
//               runs; elapsed time needs two events created with timing
//               whose records have run
//   graphs      stream capture records what is queued on a capturing stream
//               (kernels, cuBLAS GEMMs, async copies and memsets, graph
//               launches) instead of running it, in issue order; streams
//               that wait on an event recorded in the capture join it and
//               must be joined back (an event recorded on them after their
//               last work, waited on by the origin stream) before
//               cudaStreamEndCapture, else cudaErrorStreamCaptureUnjoined.
//               cudaGraphLaunch replays the recorded work in that order.
//               CUDA's capture rules are enforced: synchronizing a capturing
//               stream, and in the global mode any synchronizing, allocating
//               or blocking call (cudaMalloc, cudaFree, cudaMallocHost,
//               cudaMemcpy, cudaDeviceSynchronize, cudaStreamSynchronize,
//               cudaEventSynchronize, a pageable async copy) fails with
//               cudaErrorStreamCaptureUnsupported and invalidates the
//               capture, whose end then fails with
//               cudaErrorStreamCaptureInvalidated
//   profiler    cudaProfilerStart and cudaProfilerStop (cuda_profiler_api.h),
//               which mark what Nsight Compute profiles, do nothing here
//   counts      api_counts(): kernel launches and cuBLAS GEMMs issued by the
//               host, graph launches and the kernels they replay, and every
//               call that makes the host wait for the device, by kind
//   errors      a failing call returns its code and leaves it for
//               cudaGetLastError (per host thread), which clears it; kernel
//               failures are thrown by the launch (simt.h)
#pragma once

#include <cstddef>
#include <cstdint>

#include "kernels/cuda_emu/simt.h"

// The emulator is no CUDA release: the runtime version it reports and was built with.
#define CUDART_VERSION 0

enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorIllegalState = 401,
  cudaErrorNotReady = 600,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureUnmatched = 903,
  cudaErrorStreamCaptureUnjoined = 904,
  cudaErrorCapturedEvent = 907,
};
typedef enum cudaError cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

enum cudaDeviceAttr {
  cudaDevAttrClockRate = 13,
  cudaDevAttrMemoryClockRate = 36,
  cudaDevAttrGlobalMemoryBusWidth = 37,
};

// library_types.h
typedef enum cudaDataType_t {
  CUDA_R_32F = 0,
  CUDA_R_16F = 2,
  CUDA_R_16BF = 14,
} cudaDataType;

struct CUevent_st;
typedef CUevent_st* cudaEvent_t;
struct CUgraph_st;
typedef CUgraph_st* cudaGraph_t;
struct CUgraphExec_st;
typedef CUgraphExec_st* cudaGraphExec_t;
struct CUgraphNode_st;
typedef CUgraphNode_st* cudaGraphNode_t;

enum cudaStreamCaptureMode {
  cudaStreamCaptureModeGlobal = 0,
  cudaStreamCaptureModeThreadLocal = 1,
  cudaStreamCaptureModeRelaxed = 2,
};

enum cudaStreamCaptureStatus {
  cudaStreamCaptureStatusNone = 0,
  cudaStreamCaptureStatusActive = 1,
  cudaStreamCaptureStatusInvalidated = 2,
};

constexpr unsigned cudaStreamDefault = 0x0, cudaStreamNonBlocking = 0x1;
constexpr unsigned cudaEventDefault = 0x0, cudaEventDisableTiming = 0x2;
constexpr unsigned cudaHostAllocDefault = 0x0, cudaHostAllocPortable = 0x1,
                   cudaHostAllocMapped = 0x2, cudaHostAllocWriteCombined = 0x4;

struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int major;
  int minor;
  int multiProcessorCount;
};

cudaError_t cudaGetDeviceCount(int* count);
cudaError_t cudaSetDevice(int device);
cudaError_t cudaGetDevice(int* device);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device);
cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device);
cudaError_t cudaDeviceGetPCIBusId(char* bus_id, int len, int device);
cudaError_t cudaDeviceSynchronize();

cudaError_t cudaMalloc(void** ptr, size_t bytes);
cudaError_t cudaFree(void* ptr);
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);
cudaError_t cudaMallocHost(void** ptr, size_t bytes);
cudaError_t cudaHostAlloc(void** ptr, size_t bytes, unsigned flags);
cudaError_t cudaFreeHost(void* ptr);
cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind);
cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                            cudaStream_t stream = nullptr);
cudaError_t cudaMemset(void* ptr, int value, size_t bytes);
cudaError_t cudaMemsetAsync(void* ptr, int value, size_t bytes, cudaStream_t stream = nullptr);

cudaError_t cudaStreamCreate(cudaStream_t* stream);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags);
cudaError_t cudaStreamDestroy(cudaStream_t stream);
cudaError_t cudaStreamSynchronize(cudaStream_t stream);
cudaError_t cudaStreamQuery(cudaStream_t stream);
cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned flags = 0);
typedef void (*cudaHostFn_t)(void* user_data);
cudaError_t cudaLaunchHostFunc(cudaStream_t stream, cudaHostFn_t fn, void* user_data);

cudaError_t cudaEventCreate(cudaEvent_t* event);
cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned flags);
cudaError_t cudaEventDestroy(cudaEvent_t event);
cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr);
cudaError_t cudaEventQuery(cudaEvent_t event);
cudaError_t cudaEventSynchronize(cudaEvent_t event);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end);

cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode);
cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* graph);
cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* status);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* exec, cudaGraph_t graph,
                                 unsigned long long flags = 0);
cudaError_t cudaGraphLaunch(cudaGraphExec_t exec, cudaStream_t stream);
// Its nodes: with nodes null, *count is set to their number.
cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t* nodes, size_t* count);
cudaError_t cudaGraphDestroy(cudaGraph_t graph);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t exec);

cudaError_t cudaProfilerStart();
cudaError_t cudaProfilerStop();

cudaError_t cudaRuntimeGetVersion(int* version);
cudaError_t cudaDriverGetVersion(int* version);

cudaError_t cudaGetLastError();
cudaError_t cudaPeekAtLastError();
const char* cudaGetErrorName(cudaError_t error);
const char* cudaGetErrorString(cudaError_t error);

namespace mpiasr::emu {

// The emulated device's memory that cudaMalloc gives out: what cudaMemGetInfo
// reports as free when nothing is allocated.
constexpr size_t kDeviceBytes = size_t(4) << 30;
// What the device presents itself as (cudaGetDeviceProperties; cudaMemGetInfo's total).
constexpr const char* kPresentedName = "NVIDIA H200";
constexpr size_t kPresentedBytes = size_t(141) << 30;

// Calls counted since the start or the last reset_api_counts().
struct ApiCounts {
  uint64_t launches = 0;         // kernels and cuBLAS GEMMs issued by the host (captured ones too)
  uint64_t memsets = 0;          // cudaMemset(Async) issued by the host
  uint64_t copies = 0;           // cudaMemcpy(Async) issued by the host, of every kind
  uint64_t graph_launches = 0;   // cudaGraphLaunch
  uint64_t graph_nodes_run = 0;  // work that graph launches replayed
  // Calls that make the host wait for the device:
  uint64_t device_syncs = 0;     // cudaDeviceSynchronize
  uint64_t stream_syncs = 0;     // cudaStreamSynchronize
  uint64_t event_syncs = 0;      // cudaEventSynchronize
  uint64_t blocking_copies = 0;  // cudaMemcpy to or from the host, cudaMemcpyAsync to or from
                                 // host memory that is not pinned
  uint64_t host_syncs() const {
    return device_syncs + stream_syncs + event_syncs + blocking_copies;
  }
};
ApiCounts api_counts();
void reset_api_counts();

// How often (in percent, 0 to 100; 25 at the start) a query of work not yet
// done answers cudaErrorNotReady instead of running the work.
void set_not_ready_percent(int percent);

namespace detail {
// Whether `stream` is the default stream (null) or one created and not destroyed.
bool stream_is_valid(cudaStream_t stream);
// Runs all queued work (what cudaDeviceSynchronize does, uncounted).
void run_queued_work();
}  // namespace detail

}  // namespace mpiasr::emu
