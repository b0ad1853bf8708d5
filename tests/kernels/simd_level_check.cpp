// simd_level_check TEST [ARGS...]: runs a kernel test at the instruction-set
// level MPIASR_SIMD names (kernels/cpu/simd.h), for ctest's kernels.<level>.*
// entries (CMakeLists.txt), or skips it with exit code 77 where that level
// is not below the processor's best: above it, the processor cannot run it;
// at it, the kernel tests without MPIASR_SIMD run it already.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>

#include "kernels/cpu/simd.h"
#include "src/base/error.h"

int main(int argc, char** argv) {
  using mpiasr::SimdLevel;
  if (argc < 2) {
    std::cerr << "usage: MPIASR_SIMD=LEVEL simd_level_check TEST [ARGS...]\n";
    return 2;
  }
  std::optional<SimdLevel> level;
  try {
    level = mpiasr::parse_simd_level(std::getenv("MPIASR_SIMD"));
  } catch (const mpiasr::Error& e) {
    std::cerr << "simd_level_check: " << e.what() << "\n";
    return 2;
  }
  if (!level) {
    std::cerr << "simd_level_check: MPIASR_SIMD is not set\n";
    return 2;
  }
  const SimdLevel best = mpiasr::simd_best_level();
  const char* name = mpiasr::simd_level_name(*level);
  if (*level > best) {
    std::cout << "skipped: the kernels cannot run at " << name << " here (the best level of this "
              << "build on this processor: " << mpiasr::simd_level_name(best) << ")\n";
    return 77;
  }
  if (*level == best) {
    std::cout << "skipped: " << name << " is the best level here, which the kernel tests without "
              << "MPIASR_SIMD run\n";
    return 77;
  }
  std::cout << "MPIASR_SIMD=" << name << " (the processor's best: " << mpiasr::simd_level_name(best)
            << "): " << argv[1] << std::endl;
  execv(argv[1], argv + 1);
  std::perror(argv[1]);
  return 1;
}
