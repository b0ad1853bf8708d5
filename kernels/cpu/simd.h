// The instruction-set levels of the CPU kernels' hot loops, chosen at run
// time. The build targets baseline x86-64 for portability, which would
// otherwise leave the vectorized elementwise loops at 4 floats per
// instruction, so those loops are compiled once per level
// (kernels/cpu/simd_levels.h): generic (baseline x86-64, SSE2), avx2
// (x86-64-v3: AVX2 + FMA) and avx512 (x86-64-v4: AVX-512), and
// MPIASR_SIMD_CALL runs the one of simd_level(). On an AVX-512 Xeon the
// avx512 code ran the subsampling's first convolution and the depthwise
// convolution 1.2-1.8x, layer norm and swish 1.2-1.4x faster than the avx2
// code. (The GEMMs need none of this: OpenBLAS dispatches at run time
// itself.)
//
// The level in use is the best the processor runs, capped by the environment
// variable MPIASR_SIMD (generic, avx2 or avx512; unset or empty: no cap), so
// the avx2 and generic code run, and are tested, on an AVX-512 machine too. A
// level above the processor's best gives its best (the variable is a cap, not
// a demand); any other value is an error. The hand-written AVX2 and AVX-512
// code (dropout's Philox tiles, the Winograd convolution, the fp16 casts of
// mpi/half_wire.cpp) follows the same level. Only GCC on x86-64 builds the
// avx2 and avx512 levels; elsewhere (clang's sanitizer builds too) every
// kernel runs generic, the hand-written code included.
#pragma once

#include <optional>
#include <string>

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define MPIASR_SIMD_X86 1
#else
#define MPIASR_SIMD_X86 0
#endif

namespace mpiasr {

enum class SimdLevel { kGeneric, kAvx2, kAvx512 };

// "generic", "avx2", "avx512": the values of MPIASR_SIMD.
const char* simd_level_name(SimdLevel level);

// The best level this build holds and this processor runs.
SimdLevel simd_best_level();

// The level MPIASR_SIMD=value asks for; nullopt when value is null or empty.
// Any other value than a level's name throws Error (ExitCode::kUsage) naming
// the variable, the value and the valid values.
std::optional<SimdLevel> parse_simd_level(const char* value);

// The level the kernels run: MPIASR_SIMD's level, at most simd_best_level()
// (which it is when the variable is unset). Read once, at the first call.
SimdLevel simd_level();

// What `mpiasr --version` prints of it, e.g.
// "avx2 (capped by MPIASR_SIMD=avx2; the processor runs avx512)".
std::string simd_description();

// For tests: simd_level() returns `level` (at most simd_best_level()) while
// this lives, to compare the levels' results in one process. Not for use
// while kernels run on other threads.
class ScopedSimdLevel {
 public:
  explicit ScopedSimdLevel(SimdLevel level);
  ~ScopedSimdLevel();
  ScopedSimdLevel(const ScopedSimdLevel&) = delete;
  ScopedSimdLevel& operator=(const ScopedSimdLevel&) = delete;

 private:
  int previous_;
};

}  // namespace mpiasr

// MPIASR_SIMD_CALL(function, args...): calls simd_<level>::function(args...)
// of the level in use (an expression of the function's result). The template
// arguments of a function template are deduced from args.
#if MPIASR_SIMD_X86
#define MPIASR_SIMD_CALL(function, ...)                   \
  (::mpiasr::simd_level() == ::mpiasr::SimdLevel::kAvx512 \
       ? ::mpiasr::simd_avx512::function(__VA_ARGS__)     \
   : ::mpiasr::simd_level() == ::mpiasr::SimdLevel::kAvx2 \
       ? ::mpiasr::simd_avx2::function(__VA_ARGS__)       \
       : ::mpiasr::simd_generic::function(__VA_ARGS__))
#else
#define MPIASR_SIMD_CALL(function, ...) ::mpiasr::simd_generic::function(__VA_ARGS__)
#endif
