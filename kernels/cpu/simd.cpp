// The kernels' instruction-set level: the processor's best, MPIASR_SIMD's
// cap, and the test override (see simd.h).
#include "kernels/cpu/simd.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "src/base/error.h"

namespace mpiasr {

namespace {

constexpr const char* kVariable = "MPIASR_SIMD";

// The level ScopedSimdLevel set, or -1.
std::atomic<int> override_level{-1};

}  // namespace

const char* simd_level_name(SimdLevel level) {
  switch (level) {
    case SimdLevel::kAvx512:
      return "avx512";
    case SimdLevel::kAvx2:
      return "avx2";
    case SimdLevel::kGeneric:
      break;
  }
  return "generic";
}

SimdLevel simd_best_level() {
#if MPIASR_SIMD_X86
  __builtin_cpu_init();
  if (__builtin_cpu_supports("x86-64-v4")) return SimdLevel::kAvx512;
  if (__builtin_cpu_supports("x86-64-v3")) return SimdLevel::kAvx2;
#endif
  return SimdLevel::kGeneric;
}

std::optional<SimdLevel> parse_simd_level(const char* value) {
  if (!value || !*value) return std::nullopt;
  for (const SimdLevel level : {SimdLevel::kGeneric, SimdLevel::kAvx2, SimdLevel::kAvx512}) {
    if (std::strcmp(value, simd_level_name(level)) == 0) return level;
  }
  MPIASR_FAIL(ExitCode::kUsage, kVariable << "=" << value
                                          << " is not a level of the CPU kernels: use generic, "
                                             "avx2 or avx512 (or leave it unset for the best the "
                                             "processor runs)");
}

SimdLevel simd_level() {
  const int overridden = override_level.load(std::memory_order_relaxed);
  if (overridden >= 0) return SimdLevel(overridden);
  static const SimdLevel level = std::min(
      parse_simd_level(std::getenv(kVariable)).value_or(simd_best_level()), simd_best_level());
  return level;
}

std::string simd_description() {
  const std::string level = simd_level_name(simd_level());
  const SimdLevel best = simd_best_level();
  const char* value = std::getenv(kVariable);
  const std::optional<SimdLevel> asked = parse_simd_level(value);
  const std::string setting = std::string(kVariable) + "=" + (value ? value : "");
  if (!MPIASR_SIMD_X86) return level + " (the only level of this build)";
  if (!asked) return level + " (the processor's best; " + kVariable + " caps it)";
  if (*asked < best) {
    return level + " (capped by " + setting + "; the processor runs " + simd_level_name(best) + ")";
  }
  if (*asked == best) return level + " (" + setting + ", the processor's best)";
  return level + " (" + setting + " is above the processor's best)";
}

ScopedSimdLevel::ScopedSimdLevel(SimdLevel level) {
  MPIASR_CHECK(level <= simd_best_level(),
               "this processor does not run the " << simd_level_name(level) << " kernels");
  previous_ = override_level.exchange(int(level));
}

ScopedSimdLevel::~ScopedSimdLevel() {
  override_level.store(previous_);
}

}  // namespace mpiasr
