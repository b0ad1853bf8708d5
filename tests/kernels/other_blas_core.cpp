// other_blas_core [TEST [ARGS...]]: an OpenBLAS core of another class than
// the one OpenBLAS runs in this process (its own choice, or the
// environment's OPENBLAS_CORETYPE), which this CPU can still run: from an
// AVX-512 core (SkylakeX, Cooperlake, SapphireRapids) Haswell; from an AVX2
// core (Haswell, Zen) SkylakeX where the CPU has AVX-512, else Sandybridge
// (AVX, no FMA); from an older core Haswell where the CPU has AVX2. Runs
// under it take the kernels, and the roundings, that another machine's
// OpenBLAS would, so that a machine of one class shows what a machine of the
// other would.
//   other_blas_core               prints the core's name
//   other_blas_core TEST ARGS...  runs TEST with OPENBLAS_CORETYPE set to it
//                                 (ctest's blas.* entries, CMakeLists.txt),
//                                 after checking that OpenBLAS runs on it
// Exits 77 (ctest's skip) where there is none (an older core on a CPU
// without AVX2 and FMA).
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <iostream>
#include <string>

#include "kernels/cpu/gemm.h"

namespace {

constexpr const char* kCheckedFlag = "MPIASR_OTHER_BLAS_CORE_CHECKED";

std::string other_core() {
  const mpiasr::CpuVectorFeatures cpu = mpiasr::cpu_vector_features();
  const std::string running = mpiasr::openblas_core();
  const auto one_of = [&](std::initializer_list<const char*> cores) {
    return std::find(cores.begin(), cores.end(), running) != cores.end();
  };
  if (one_of({"SkylakeX", "Cooperlake", "SapphireRapids"})) return "Haswell";
  if (one_of({"Haswell", "Zen"})) return cpu.avx512 ? "SkylakeX" : "Sandybridge";
  return cpu.avx2_fma ? "Haswell" : "";
}

}  // namespace

int main(int argc, char** argv) {
  // Second pass: OpenBLAS read OPENBLAS_CORETYPE as this process loaded it.
  if (const char* wanted = std::getenv(kCheckedFlag)) {
    if (mpiasr::openblas_core() != wanted) {
      std::cerr << "other_blas_core: OPENBLAS_CORETYPE=" << wanted
                << " did not take: OpenBLAS runs " << mpiasr::openblas_core() << "\n";
      return 1;
    }
    unsetenv(kCheckedFlag);
    std::cout << "OPENBLAS_CORETYPE=" << wanted << ": " << argv[1] << std::endl;
    execv(argv[1], argv + 1);
    std::perror(argv[1]);
    return 1;
  }
  const std::string core = other_core();
  if (core.empty()) {
    std::cout << "skipped: OpenBLAS runs " << mpiasr::openblas_core()
              << " on a CPU without AVX2 and FMA: no core of another class is chosen\n";
    return 77;
  }
  if (argc < 2) {
    std::cout << core << "\n";
    return 0;
  }
  setenv("OPENBLAS_CORETYPE", core.c_str(), 1);
  setenv(kCheckedFlag, core.c_str(), 1);
  execv("/proc/self/exe", argv);
  std::perror("/proc/self/exe");
  return 1;
}
