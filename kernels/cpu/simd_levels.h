// Compiles the file that MPIASR_SIMD_SOURCE names (a kernel's loops, e.g.
// "kernels/cpu/layernorm_simd.h") once per level of kernels/cpu/simd.h: into
// namespace mpiasr::simd_generic as the build targets, and with GCC on x86-64
// into mpiasr::simd_avx2 for x86-64-v3 and mpiasr::simd_avx512 for x86-64-v4
// (#pragma GCC target). OpenMP's outlined loop bodies take the target of the
// function that holds them. Each copy is in an unnamed namespace: only the
// wrappers of the file that includes it call it, through MPIASR_SIMD_CALL.
// The source may read kSimdLevel, the level its copy is built for (GCC does
// not define __AVX2__ or __AVX512F__ under #pragma GCC target), to choose
// sizes that fit the level's registers.
//
// Usage, in the kernel's .cpp at global scope, after its includes and the
// helpers the loops call, before the wrappers:
//   #define MPIASR_SIMD_SOURCE "kernels/cpu/layernorm_simd.h"
//   #include "kernels/cpu/simd_levels.h"
// No include guard: each .cpp includes it once, with its own source. The
// source holds definitions only, no #include (its .cpp includes what it
// needs), and is included nowhere else.
#ifndef MPIASR_SIMD_SOURCE
#error "define MPIASR_SIMD_SOURCE before including kernels/cpu/simd_levels.h"
#endif

#include "kernels/cpu/simd.h"

namespace mpiasr::simd_generic {
namespace {
[[maybe_unused]] constexpr SimdLevel kSimdLevel = SimdLevel::kGeneric;
#include MPIASR_SIMD_SOURCE
}  // namespace
}  // namespace mpiasr::simd_generic

#if MPIASR_SIMD_X86
#pragma GCC push_options
#pragma GCC target("arch=x86-64-v3")
namespace mpiasr::simd_avx2 {
namespace {
[[maybe_unused]] constexpr SimdLevel kSimdLevel = SimdLevel::kAvx2;
#include MPIASR_SIMD_SOURCE
}  // namespace
}  // namespace mpiasr::simd_avx2
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("arch=x86-64-v4")
namespace mpiasr::simd_avx512 {
namespace {
[[maybe_unused]] constexpr SimdLevel kSimdLevel = SimdLevel::kAvx512;
#include MPIASR_SIMD_SOURCE
}  // namespace
}  // namespace mpiasr::simd_avx512
#pragma GCC pop_options
#endif

#undef MPIASR_SIMD_SOURCE
