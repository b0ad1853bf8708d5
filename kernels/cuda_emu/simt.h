// The SIMT emulator: CUDA's device language for the host compiler, so the
// kernels of kernels/cuda compile as C++ and run on the CPU in tests (the
// emulation build, MPIASR_CUDA_EMU). This is the one header they see there;
// kernels/cuda_emu/include/ puts it behind <cuda_runtime.h> and <cuda_fp16.h>.
//
// What it provides:
//   __global__ __device__ __host__ __forceinline__   empty qualifiers
//   dim3, uint3, threadIdx, blockIdx, blockDim, gridDim, warpSize
//   __syncthreads                        block barrier
//   __shfl_sync / _up / _down / _xor     warp shuffles, with mask and width
//   __ballot_sync __any_sync __all_sync __syncwarp
//   atomicAdd Sub Exch Min Max CAS And Or Xor   on int, unsigned, unsigned
//                                        long long, and Add/Exch on float, double
//   __half, __half2 and the fp16 intrinsics below (on _Float16);
//   __nv_bfloat16, __nv_bfloat162 and the bf16 intrinsics below (on the bits)
//   int2 uint2 float2 int4 uint4 float4 with CUDA's sizes and alignments
//   math: max/min overloads, rsqrtf, __expf, __logf, __fdividef, __saturatef ...
//   shared memory and launches through kernels/cuda/launch.h (MPIASR_SHARED,
//   MPIASR_DYNAMIC_SHARED, MPIASR_LAUNCH), the same lines as the CUDA build
//
// How a launch runs (kernels/cuda_emu/simt.cpp). The grid's blocks are taken
// by two OS threads; one block at a time per OS thread. Within a block every
// CUDA thread is a fiber (Boost.Context) with its own 64 KiB stack: it runs
// until it reaches __syncthreads or a warp collective, or ends. A barrier
// releases when all threads of the block wait at the same __syncthreads; a warp
// collective completes when every lane of its mask has arrived, each lane then
// reading the value of its source lane. Between two barriers the threads are
// started or resumed in an order drawn afresh for every block and interval;
// the lanes a collective releases (the last to arrive among them) resume in
// an order drawn afresh too, mixed into the threads still queued (seeded by
// MPIASR_EMU_SEED and the block: a run repeats exactly under one seed). A
// missing barrier lets a reader run before its writer and read the block's shared
// memory as it was filled at the block's start: 0xFF bytes (NaN in floats,
// -1 in integers), which no correct result contains. Shared memory is one
// arena per block, AddressSanitizer-poisoned outside the declared variables;
// the build runs under AddressSanitizer, so an index out of bounds, in global
// or shared memory, stops the test with a report.
//
// Errors, not hangs: a launch fails with Error naming the kernel, the launch's
// file and line, block and thread, when the configuration exceeds the limits
// (more than 1024 threads per block or per-dimension limits, a grid of zero or
// too many blocks, more than 48 KiB of shared memory), when a thread exits
// while others wait at a barrier or reaches a barrier after another exited,
// when threads wait at different __syncthreads, when a warp collective's mask
// leaves out the caller, names lanes that do not exist or have exited, reads a
// lane outside the mask, or meets lanes in a different collective, and when
// no thread can run while some still wait.
//
// Limits (what the emulator does not model):
//   - no memory model: every store is visible at once to every thread of the
//     block, and blocks on different OS threads race like host threads do
//     (only atomics are atomic); fences and the weak ordering of real global
//     memory are not modelled, nor is the absence of coherence between blocks.
//     What is modelled, under racecheck (racecheck.h): which accesses
//     barriers and warp collectives order, so two accesses to one byte that
//     nothing orders (one of them a write, not both atomics) are reported,
//     whatever order this run gave them
//   - no timing: no clock(), events time the host; streams queue their work
//     and a synchronizing call runs it one piece at a time in a random order
//     that keeps stream order and events (runtime.h), so two streams' work
//     interleaves but never runs at the same time
//   - an idealised warp schedule: lanes run independently between
//     collectives (as Volta's independent thread scheduling allows), never in
//     lockstep, and only the order of whole intervals between synchronization
//     points (barriers and collectives) varies; a race inside one interval that needs an
//     interleaving at a finer grain, or that this run's order happens to hide, goes unseen
//     unless racecheck is on
//   - host arithmetic: math functions are glibc's and the host compiler does
//     not contract a * b + c into FMA as nvcc does, so results may differ from
//     the GPU's in the last bits
//   - no __activemask: lanes never run converged here, so "the lanes active
//     now" has no meaning; collectives take explicit masks
//   - no dynamic shared memory opt-in (cudaFuncSetAttribute), no cooperative
//     launches, no textures, no device-side printf buffering
#pragma once

#include <math.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <source_location>
#include <string>
#include <type_traits>

#include "kernels/bfloat16.h"

// Out of line, so that a sanitizer's report from a kernel names it in the stack.
#define __global__ __attribute__((noinline))
#define __device__
#define __host__
#define __forceinline__ inline
// Shared memory is declared with MPIASR_SHARED / MPIASR_DYNAMIC_SHARED
// (kernels/cuda/launch.h): C++ has no storage that is per block, nor a meaning
// for `extern __shared__ T x[]`.
#define __shared__ \
  static_assert(false, "declare shared memory with MPIASR_SHARED or MPIASR_DYNAMIC_SHARED");

// ---- launch shapes and the built-in variables -----------------------------

struct uint3 {
  unsigned x, y, z;
};

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};

// Set by the emulator for the running fiber before it runs.
inline thread_local constinit uint3 threadIdx{0, 0, 0};
inline thread_local constinit uint3 blockIdx{0, 0, 0};
inline thread_local constinit dim3 blockDim{1, 1, 1};
inline thread_local constinit dim3 gridDim{1, 1, 1};
constexpr int warpSize = 32;

struct CUstream_st;
typedef CUstream_st* cudaStream_t;

namespace mpiasr::emu {

// Where a launch was written: the kernel's name, the file and the line.
struct LaunchSite {
  const char* kernel;
  const char* file;
  int line;
};

namespace detail {
// The runtime's side of launches (runtime.cpp): queuing work on a stream
// (recorded into the graph when the stream is capturing; run before the
// call returns on the legacy default stream, runtime.h), and the count of
// launches the host issued.
void queue_work(cudaStream_t stream, std::function<void()> work);
void count_launch();
// Throws as launch() does for a bad configuration.
void check_launch(const LaunchSite& site, dim3 grid, dim3 block, size_t dynamic_shared_bytes);
// Checks a launch on `stream` (throwing as launch() does), counts it and
// queues `grid_run` (which runs the grid) there.
void queue_launch(const LaunchSite& site, dim3 grid, dim3 block, size_t dynamic_shared_bytes,
                  cudaStream_t stream, std::function<void()> grid_run);
// Runs `body(closure)` as every thread of a grid and returns when all are
// done: what a queued launch does when it runs.
void run_grid(const LaunchSite& site, dim3 grid, dim3 block, size_t dynamic_shared_bytes,
              void (*body)(const void*), const void* closure);
}  // namespace detail

// Checks a launch now and queues the grid on `stream` with a copy of its
// arguments (as CUDA takes them by value), to run when the stream's work
// does (runtime.h); throws Error naming the site for a bad configuration,
// and the grid, when it runs, for a failure.
template <typename Body>
void launch(const LaunchSite& site, dim3 grid, dim3 block, size_t dynamic_shared_bytes,
            cudaStream_t stream, const Body& body) {
  constexpr auto trampoline = [](const void* closure) { (*static_cast<const Body*>(closure))(); };
  detail::queue_launch(site, grid, block, dynamic_shared_bytes, stream, [=, copy = body] {
    detail::run_grid(site, grid, block, dynamic_shared_bytes, trampoline, &copy);
  });
}

// The order in which a block's threads start or resume between two barriers,
// and the lanes of a warp after each collective: drawn afresh from the block's
// random sequence, lanes mixed into the threads queued (the default), or by
// ascending or descending index, lanes after them (tests show what each
// exposes). Read from the variable MPIASR_EMU_SCHEDULE (shuffled, ascending
// or descending; shuffled when unset), printed at a process's first launch
// and named in every launch failure.
enum class Schedule { kShuffled, kAscending, kDescending };
void set_schedule(Schedule schedule);

// The seed of the shuffled schedules: a block's random sequence is drawn from
// (seed, block), so a run repeats exactly under one seed. It is read from the
// variable MPIASR_EMU_SEED (an unsigned integer; 0 when unset), printed on
// stderr at a process's first launch and named in every launch failure
// under the shuffled schedule.
uint64_t schedule_seed();
void set_schedule_seed(uint64_t seed);

// Identifies one static shared variable (one per declaration and template
// instantiation): its address is the key of the block's copy.
struct SharedSlot {
  char unused = 0;
};

namespace detail {
void* shared_variable(const SharedSlot* slot, size_t bytes, size_t alignment, const char* name);
void* dynamic_shared();

enum class WarpOp : uint8_t { kShfl, kShflUp, kShflDown, kShflXor, kBallot, kSyncWarp, kWmma };
// The calling lane's part of a warp collective over `mask`: it deposits
// `value` and waits until every lane of the mask has; returns the value of its
// source lane (shuffles: from `argument` and `width` as CUDA defines them) or,
// for kBallot, the mask of lanes whose value was non-zero.
uint64_t warp_collective(WarpOp op, unsigned mask, uint64_t value, int argument, int width,
                         const char* name, const std::source_location& where);
void syncthreads(const std::source_location& where);
// Fails the running kernel with `what` (naming the place) unless `ok`.
void require(bool ok, const char* what, const std::source_location& where);
// Whether the calling OS thread is running a kernel's thread now.
bool in_kernel();
// The running launch's number in this process: 1 for the first grid run,
// counting every run, a graph's replays included.
uint64_t launch_number();
// Fails the running kernel with `what`.
[[noreturn]] void fail_kernel(const std::string& what);

template <typename T>
uint64_t to_bits(T value) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "shuffle of a large type");
  uint64_t bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

template <typename T>
T from_bits(uint64_t bits) {
  T value;
  std::memcpy(&value, &bits, sizeof(T));
  return value;
}
}  // namespace detail

template <typename T>
T& shared_variable(const SharedSlot* slot, const char* name) {
  return *static_cast<T*>(detail::shared_variable(slot, sizeof(T), alignof(T), name));
}

template <typename T>
T* dynamic_shared() {
  return static_cast<T*>(detail::dynamic_shared());
}

}  // namespace mpiasr::emu

// ---- synchronization ---------------------------------------------------------

inline void __syncthreads(std::source_location where = std::source_location::current()) {
  mpiasr::emu::detail::syncthreads(where);
}

template <typename T>
T __shfl_sync(unsigned mask, T var, int src_lane, int width = warpSize,
              std::source_location where = std::source_location::current()) {
  using namespace mpiasr::emu::detail;
  return from_bits<T>(
      warp_collective(WarpOp::kShfl, mask, to_bits(var), src_lane, width, "__shfl_sync", where));
}

template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                 std::source_location where = std::source_location::current()) {
  using namespace mpiasr::emu::detail;
  return from_bits<T>(warp_collective(WarpOp::kShflUp, mask, to_bits(var), int(delta), width,
                                      "__shfl_up_sync", where));
}

template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned delta, int width = warpSize,
                   std::source_location where = std::source_location::current()) {
  using namespace mpiasr::emu::detail;
  return from_bits<T>(warp_collective(WarpOp::kShflDown, mask, to_bits(var), int(delta), width,
                                      "__shfl_down_sync", where));
}

template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int lane_mask, int width = warpSize,
                  std::source_location where = std::source_location::current()) {
  using namespace mpiasr::emu::detail;
  return from_bits<T>(warp_collective(WarpOp::kShflXor, mask, to_bits(var), lane_mask, width,
                                      "__shfl_xor_sync", where));
}

inline unsigned __ballot_sync(unsigned mask, int predicate,
                              std::source_location where = std::source_location::current()) {
  using namespace mpiasr::emu::detail;
  return unsigned(
      warp_collective(WarpOp::kBallot, mask, predicate != 0, 0, warpSize, "__ballot_sync", where));
}

inline int __any_sync(unsigned mask, int predicate,
                      std::source_location where = std::source_location::current()) {
  using namespace mpiasr::emu::detail;
  return warp_collective(WarpOp::kBallot, mask, predicate != 0, 0, warpSize, "__any_sync", where) !=
         0;
}

inline int __all_sync(unsigned mask, int predicate,
                      std::source_location where = std::source_location::current()) {
  using namespace mpiasr::emu::detail;
  return warp_collective(WarpOp::kBallot, mask, predicate != 0, 0, warpSize, "__all_sync", where) ==
         mask;
}

inline void __syncwarp(unsigned mask = 0xffffffffu,
                       std::source_location where = std::source_location::current()) {
  using namespace mpiasr::emu::detail;
  warp_collective(WarpOp::kSyncWarp, mask, 0, 0, warpSize, "__syncwarp", where);
}

// ---- atomics (global or shared memory; they return the old value) ------------

namespace mpiasr::emu::detail {
// The check of an atomic's access (memory_check.cpp): AddressSanitizer's, and
// racecheck's, to which an atomic races with no other atomic.
void atomic_access(void* address, size_t bytes);

// Not instrumented itself (its loads and stores are the one atomic access
// checked first).
template <typename T, typename Op>
__attribute__((no_sanitize("address", "thread"))) T atomic_update(T* address, Op op) {
  atomic_access(address, sizeof(T));
  __atomic_thread_fence(__ATOMIC_SEQ_CST);
  T old = __atomic_load_n(address, __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(address, &old, op(old), true, __ATOMIC_SEQ_CST,
                                      __ATOMIC_RELAXED)) {
  }
  return old;
}

template <typename T>
T atomic_float_update(T* address, T value, bool add) {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  Bits* bits = reinterpret_cast<Bits*>(address);
  const Bits old = atomic_update(bits, [&](Bits current) {
    T x;
    std::memcpy(&x, &current, sizeof x);
    x = add ? x + value : value;
    Bits next;
    std::memcpy(&next, &x, sizeof next);
    return next;
  });
  T result;
  std::memcpy(&result, &old, sizeof result);
  return result;
}
}  // namespace mpiasr::emu::detail

#define MPIASR_EMU_INTEGER_ATOMICS(T)                                                              \
  inline T atomicAdd(T* a, T v) {                                                                  \
    return mpiasr::emu::detail::atomic_update(a, [v](T x) { return static_cast<T>(x + v); });      \
  }                                                                                                \
  inline T atomicSub(T* a, T v) {                                                                  \
    return mpiasr::emu::detail::atomic_update(a, [v](T x) { return static_cast<T>(x - v); });      \
  }                                                                                                \
  inline T atomicExch(T* a, T v) {                                                                 \
    return mpiasr::emu::detail::atomic_update(a, [v](T) { return v; });                            \
  }                                                                                                \
  inline T atomicMin(T* a, T v) {                                                                  \
    return mpiasr::emu::detail::atomic_update(a, [v](T x) { return v < x ? v : x; });              \
  }                                                                                                \
  inline T atomicMax(T* a, T v) {                                                                  \
    return mpiasr::emu::detail::atomic_update(a, [v](T x) { return v > x ? v : x; });              \
  }                                                                                                \
  inline T atomicAnd(T* a, T v) {                                                                  \
    return mpiasr::emu::detail::atomic_update(a, [v](T x) { return static_cast<T>(x & v); });      \
  }                                                                                                \
  inline T atomicOr(T* a, T v) {                                                                   \
    return mpiasr::emu::detail::atomic_update(a, [v](T x) { return static_cast<T>(x | v); });      \
  }                                                                                                \
  inline T atomicXor(T* a, T v) {                                                                  \
    return mpiasr::emu::detail::atomic_update(a, [v](T x) { return static_cast<T>(x ^ v); });      \
  }                                                                                                \
  inline T atomicCAS(T* a, T compare, T v) {                                                       \
    return mpiasr::emu::detail::atomic_update(a,                                                   \
                                              [compare, v](T x) { return x == compare ? v : x; }); \
  }
MPIASR_EMU_INTEGER_ATOMICS(int)
MPIASR_EMU_INTEGER_ATOMICS(unsigned)
MPIASR_EMU_INTEGER_ATOMICS(unsigned long long)
#undef MPIASR_EMU_INTEGER_ATOMICS

inline float atomicAdd(float* a, float v) {
  return mpiasr::emu::detail::atomic_float_update(a, v, true);
}
inline double atomicAdd(double* a, double v) {
  return mpiasr::emu::detail::atomic_float_update(a, v, true);
}
inline float atomicExch(float* a, float v) {
  return mpiasr::emu::detail::atomic_float_update(a, v, false);
}

// ---- vector types (vector_types.h) --------------------------------------------
// With CUDA's sizes and alignments, so a 128-bit access through uint4 or
// float4 has the alignment a GPU demands (16 bytes) and a misaligned one is
// undefined here as there; kernels/cuda loads eight 16-bit values at once
// through them.

struct alignas(8) int2 {
  int x, y;
};
struct alignas(8) uint2 {
  unsigned x, y;
};
struct alignas(8) float2 {
  float x, y;
};
struct alignas(16) int4 {
  int x, y, z, w;
};
struct alignas(16) uint4 {
  unsigned x, y, z, w;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
static_assert(sizeof(uint2) == 8 && alignof(uint2) == 8 && sizeof(float2) == 8);
static_assert(sizeof(uint4) == 16 && alignof(uint4) == 16 && sizeof(float4) == 16 &&
              alignof(float4) == 16 && sizeof(int4) == 16 && alignof(int4) == 16);

inline int2 make_int2(int x, int y) {
  return {x, y};
}
inline uint2 make_uint2(unsigned x, unsigned y) {
  return {x, y};
}
inline float2 make_float2(float x, float y) {
  return {x, y};
}
inline int4 make_int4(int x, int y, int z, int w) {
  return {x, y, z, w};
}
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) {
  return {x, y, z, w};
}
inline float4 make_float4(float x, float y, float z, float w) {
  return {x, y, z, w};
}

// ---- half precision (cuda_fp16.h) --------------------------------------------
// __half holds an IEEE binary16 (_Float16); conversions from float round to
// nearest even, as __float2half_rn does. Arithmetic is done in float and
// rounded once to half, which gives the correctly rounded result for + - * /
// (float has more than twice half's precision); fma rounds twice (to float,
// then to half), which can differ from a fused result in the last bit.

struct __half {
  __half() = default;
  __half(float f) : value(static_cast<_Float16>(f)) {}
  __half(double d) : value(static_cast<_Float16>(d)) {}
  operator float() const { return static_cast<float>(value); }
  _Float16 value;
};

struct alignas(4) __half2 {
  __half x, y;
};

inline __half __float2half(float f) {
  return __half(f);
}
inline __half __float2half_rn(float f) {
  return __half(f);
}
inline float __half2float(__half h) {
  return float(h);
}

inline __half __hadd(__half a, __half b) {
  return __half(float(a) + float(b));
}
inline __half __hsub(__half a, __half b) {
  return __half(float(a) - float(b));
}
inline __half __hmul(__half a, __half b) {
  return __half(float(a) * float(b));
}
inline __half __hdiv(__half a, __half b) {
  return __half(float(a) / float(b));
}
inline __half __hfma(__half a, __half b, __half c) {
  return __half(fmaf(float(a), float(b), float(c)));
}
inline __half __hneg(__half a) {
  return __half(-float(a));
}
inline __half __hmax(__half a, __half b) {
  return __half(fmaxf(float(a), float(b)));
}
inline __half __hmin(__half a, __half b) {
  return __half(fminf(float(a), float(b)));
}
inline bool __hisnan(__half a) {
  return isnan(float(a));
}
inline __half hexp(__half a) {
  return __half(expf(float(a)));
}
inline __half hlog(__half a) {
  return __half(logf(float(a)));
}
inline __half hsqrt(__half a) {
  return __half(sqrtf(float(a)));
}
inline __half hrsqrt(__half a) {
  return __half(1.0f / sqrtf(float(a)));
}

inline __half operator+(const __half& a, const __half& b) {
  return __hadd(a, b);
}
inline __half operator-(const __half& a, const __half& b) {
  return __hsub(a, b);
}
inline __half operator*(const __half& a, const __half& b) {
  return __hmul(a, b);
}
inline __half operator/(const __half& a, const __half& b) {
  return __hdiv(a, b);
}
inline __half operator-(const __half& a) {
  return __hneg(a);
}

inline __half2 __halves2half2(__half low, __half high) {
  return {low, high};
}
inline __half2 __floats2half2_rn(float low, float high) {
  return {__half(low), __half(high)};
}
inline __half2 __float2half2_rn(float f) {
  return {__half(f), __half(f)};
}
inline float2 __half22float2(__half2 h) {
  return {float(h.x), float(h.y)};
}
inline float __low2float(__half2 h) {
  return float(h.x);
}
inline float __high2float(__half2 h) {
  return float(h.y);
}
inline __half2 __hadd2(__half2 a, __half2 b) {
  return {__hadd(a.x, b.x), __hadd(a.y, b.y)};
}
inline __half2 __hsub2(__half2 a, __half2 b) {
  return {__hsub(a.x, b.x), __hsub(a.y, b.y)};
}
inline __half2 __hmul2(__half2 a, __half2 b) {
  return {__hmul(a.x, b.x), __hmul(a.y, b.y)};
}
inline __half2 __h2div(__half2 a, __half2 b) {
  return {__hdiv(a.x, b.x), __hdiv(a.y, b.y)};
}
inline __half2 __hfma2(__half2 a, __half2 b, __half2 c) {
  return {__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)};
}
inline __half2 h2exp(__half2 a) {
  return {hexp(a.x), hexp(a.y)};
}

// ---- bfloat16 (cuda_bf16.h) ----------------------------------------------------
// __nv_bfloat16 holds the upper 16 bits of an IEEE binary32 (8 exponent bits,
// 7 fraction bits). From float (kernels/bfloat16.h): round to nearest even
// on the bits, NaN stays a quiet NaN, values beyond the largest bfloat16 by
// half an ulp become infinite, as __float2bfloat16_rn; to float: exact.
// Arithmetic is done in float and rounded once to bfloat16, which gives the
// correctly rounded result for + - * (float has more than twice bfloat16's
// precision); fma rounds twice (to float, then to bfloat16), which can differ
// from a fused result in the last bit.

struct __nv_bfloat16 {
  __nv_bfloat16() = default;
  __nv_bfloat16(float f) : bits(mpiasr::float_to_bfloat16_bits(f)) {}
  operator float() const { return mpiasr::bfloat16_bits_to_float(bits); }
  uint16_t bits;
};

struct alignas(4) __nv_bfloat162 {
  __nv_bfloat16 x, y;
};

static_assert(sizeof(__nv_bfloat16) == 2 && alignof(__nv_bfloat16) == 2);
static_assert(sizeof(__nv_bfloat162) == 4 && alignof(__nv_bfloat162) == 4);
static_assert(sizeof(__half) == 2 && alignof(__half) == 2 && sizeof(__half2) == 4);

inline __nv_bfloat16 __float2bfloat16(float f) {
  return __nv_bfloat16(f);
}
inline __nv_bfloat16 __float2bfloat16_rn(float f) {
  return __nv_bfloat16(f);
}
inline float __bfloat162float(__nv_bfloat16 b) {
  return float(b);
}
inline __nv_bfloat162 make_bfloat162(__nv_bfloat16 x, __nv_bfloat16 y) {
  return {x, y};
}
inline __nv_bfloat162 __halves2bfloat162(__nv_bfloat16 low, __nv_bfloat16 high) {
  return {low, high};
}
inline __nv_bfloat162 __floats2bfloat162_rn(float low, float high) {
  return {__nv_bfloat16(low), __nv_bfloat16(high)};
}
inline __nv_bfloat162 __float2bfloat162_rn(float f) {
  return {__nv_bfloat16(f), __nv_bfloat16(f)};
}
inline float2 __bfloat1622float2(__nv_bfloat162 b) {
  return {float(b.x), float(b.y)};
}
inline float __low2float(__nv_bfloat162 b) {
  return float(b.x);
}
inline float __high2float(__nv_bfloat162 b) {
  return float(b.y);
}
inline __nv_bfloat16 __hadd(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __nv_bfloat16(float(a) + float(b));
}
inline __nv_bfloat16 __hsub(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __nv_bfloat16(float(a) - float(b));
}
inline __nv_bfloat16 __hmul(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __nv_bfloat16(float(a) * float(b));
}
inline __nv_bfloat16 __hfma(__nv_bfloat16 a, __nv_bfloat16 b, __nv_bfloat16 c) {
  return __nv_bfloat16(fmaf(float(a), float(b), float(c)));
}
inline __nv_bfloat16 __hneg(__nv_bfloat16 a) {
  __nv_bfloat16 r = a;
  r.bits ^= 0x8000u;
  return r;
}
inline __nv_bfloat16 __hmax(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __nv_bfloat16(fmaxf(float(a), float(b)));
}
inline __nv_bfloat16 __hmin(__nv_bfloat16 a, __nv_bfloat16 b) {
  return __nv_bfloat16(fminf(float(a), float(b)));
}
inline bool __hisnan(__nv_bfloat16 a) {
  return isnan(float(a));
}
inline __nv_bfloat162 __hadd2(__nv_bfloat162 a, __nv_bfloat162 b) {
  return {__hadd(a.x, b.x), __hadd(a.y, b.y)};
}
inline __nv_bfloat162 __hmul2(__nv_bfloat162 a, __nv_bfloat162 b) {
  return {__hmul(a.x, b.x), __hmul(a.y, b.y)};
}
inline __nv_bfloat162 __hfma2(__nv_bfloat162 a, __nv_bfloat162 b, __nv_bfloat162 c) {
  return {__hfma(a.x, b.x, c.x), __hfma(a.y, b.y, c.y)};
}

// ---- math intrinsics -----------------------------------------------------------
// CUDA's fast approximations are the exact host functions here.

#define MPIASR_EMU_MIN_MAX(T) \
  inline T max(T a, T b) {    \
    return a > b ? a : b;     \
  }                           \
  inline T min(T a, T b) {    \
    return a < b ? a : b;     \
  }
MPIASR_EMU_MIN_MAX(int)
MPIASR_EMU_MIN_MAX(unsigned)
MPIASR_EMU_MIN_MAX(long)
MPIASR_EMU_MIN_MAX(unsigned long)
MPIASR_EMU_MIN_MAX(long long)
MPIASR_EMU_MIN_MAX(unsigned long long)
#undef MPIASR_EMU_MIN_MAX
inline float max(float a, float b) {
  return fmaxf(a, b);
}
inline float min(float a, float b) {
  return fminf(a, b);
}
inline double max(double a, double b) {
  return fmax(a, b);
}
inline double min(double a, double b) {
  return fmin(a, b);
}

inline float rsqrtf(float x) {
  return 1.0f / sqrtf(x);
}
inline double rsqrt(double x) {
  return 1.0 / sqrt(x);
}
inline float __expf(float x) {
  return expf(x);
}
inline float __logf(float x) {
  return logf(x);
}
inline float __sinf(float x) {
  return sinf(x);
}
inline float __cosf(float x) {
  return cosf(x);
}
inline float __powf(float x, float y) {
  return powf(x, y);
}
inline float __fdividef(float x, float y) {
  return x / y;
}
inline float __frcp_rn(float x) {
  return 1.0f / x;
}
inline float __fsqrt_rn(float x) {
  return sqrtf(x);
}
inline float __fmaf_rn(float a, float b, float c) {
  return fmaf(a, b, c);
}
inline float __saturatef(float x) {
  return x >= 1.0f ? 1.0f : (x > 0.0f ? x : 0.0f);  // NaN -> 0, as on the GPU
}
inline int __float_as_int(float x) {
  int i;
  std::memcpy(&i, &x, sizeof i);
  return i;
}
inline float __int_as_float(int i) {
  float x;
  std::memcpy(&x, &i, sizeof x);
  return x;
}
inline unsigned __float_as_uint(float x) {
  unsigned u;
  std::memcpy(&u, &x, sizeof u);
  return u;
}
inline float __uint_as_float(unsigned u) {
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}
inline int __popc(unsigned x) {
  return __builtin_popcount(x);
}
inline int __clz(int x) {
  return x == 0 ? 32 : __builtin_clz(unsigned(x));
}
inline int __ffs(int x) {
  return __builtin_ffs(x);
}
