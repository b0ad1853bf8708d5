// Kernel launches and shared memory, written once for both builds of
// kernels/cuda (nvcc, and the SIMT emulator: MPIASR_CUDA_EMU, kernels/cuda_emu):
//
//   MPIASR_LAUNCH(kernel, grid, block, shared_bytes, stream, args...)
//       nvcc:      kernel<<<grid, block, shared_bytes, stream>>>(args...), then
//                  cudaGetLastError; a bad launch throws Error naming the
//                  kernel, the file and the line of the launch
//       emulator:  queues the grid on the stream, to run on the CPU when a
//                  synchronizing call needs it (at once on the legacy default
//                  stream: kernels/cuda_emu/runtime.h), or records it when
//                  the stream is capturing a graph; a bad launch throws the
//                  same way at once, and a failing block from the call that
//                  runs it, saying what went wrong
//       both:      evaluates the arguments once; in a step graph's dry or
//                  capturing pass signs the launch, and in a dry pass queues
//                  nothing (kernels/cuda/step_graph.h); counts a launch that
//                  is queued (kernels/cuda/call_counts.h)
//   MPIASR_SHARED(T, name)          a static shared variable of type T, arrays
//                                   included (MPIASR_SHARED(float[32][33], tile))
//   MPIASR_DYNAMIC_SHARED(T, name)  T* name: the launch's dynamic shared memory
#pragma once

#include <tuple>

#include "kernels/cuda/call_counts.h"
#include "kernels/cuda/step_graph.h"

// Signs the launch whose arguments are the tuple mpiasr_arguments_ (step
// graphs, kernels/cuda/step_graph.h); false: a dry pass, not to be launched.
#define MPIASR_SIGN_LAUNCH(kernel, grid, block, shared_bytes)                       \
  std::apply(                                                                       \
      [&](const auto&... a) {                                                       \
        return ::mpiasr::cuda_detail::sign_launch(#kernel, dim3(grid), dim3(block), \
                                                  size_t(shared_bytes), a...);      \
      },                                                                            \
      mpiasr_arguments_)

#ifdef MPIASR_CUDA_EMU

#include "kernels/cuda_emu/simt.h"

#define MPIASR_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                              \
  do {                                                                                             \
    auto mpiasr_arguments_ = std::make_tuple(__VA_ARGS__);                                         \
    if (!MPIASR_SIGN_LAUNCH(kernel, grid, block, shared_bytes)) break;                             \
    ::mpiasr::cuda_detail::count_queued_launch();                                                  \
    ::mpiasr::emu::launch({#kernel, __FILE__, __LINE__}, grid, block, shared_bytes, stream,        \
                          [mpiasr_arguments_ = std::move(mpiasr_arguments_)] {                     \
                            std::apply([](const auto&... a) { kernel(a...); }, mpiasr_arguments_); \
                          });                                                                      \
  } while (0)

#define MPIASR_SHARED(T, name)                                            \
  static constexpr ::mpiasr::emu::SharedSlot mpiasr_shared_slot_##name{}; \
  auto& name = ::mpiasr::emu::shared_variable<T>(&mpiasr_shared_slot_##name, #name)

#define MPIASR_DYNAMIC_SHARED(T, name) T* const name = ::mpiasr::emu::dynamic_shared<T>()

#else

#include <cuda_runtime.h>

#include <type_traits>

#include "kernels/cuda/cuda_check.h"

#define MPIASR_LAUNCH(kernel, grid, block, shared_bytes, stream, ...)                           \
  do {                                                                                          \
    auto mpiasr_arguments_ = std::make_tuple(__VA_ARGS__);                                      \
    if (!MPIASR_SIGN_LAUNCH(kernel, grid, block, shared_bytes)) break;                          \
    ::mpiasr::cuda_detail::count_queued_launch();                                               \
    std::apply([&](const auto&... a) { kernel<<<grid, block, shared_bytes, stream>>>(a...); },  \
               mpiasr_arguments_);                                                              \
    const cudaError_t mpiasr_launch_code_ = cudaGetLastError();                                 \
    if (mpiasr_launch_code_ != cudaSuccess) {                                                   \
      ::mpiasr::cuda_detail::cuda_call_failed("launch of kernel " #kernel, mpiasr_launch_code_, \
                                              __FILE__, __LINE__);                              \
    }                                                                                           \
  } while (0)

#define MPIASR_SHARED(T, name) __shared__ ::std::type_identity_t<T> name

#define MPIASR_DYNAMIC_SHARED(T, name) extern __shared__ T name[]

#endif
