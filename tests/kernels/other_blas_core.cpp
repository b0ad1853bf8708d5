// other_blas_core [TEST [ARGS...]]: an OpenBLAS core of another class than
// the one this CPU runs by default, which this CPU can still run: Haswell
// (AVX2 and FMA) on a CPU with AVX-512, Sandybridge (AVX, no FMA) on one with
// AVX2 and FMA only. Runs under it take the kernels, and the roundings, that
// another machine's OpenBLAS would, so that a machine of one class shows
// what a machine of the other would.
//   other_blas_core               prints the core's name
//   other_blas_core TEST ARGS...  runs TEST with OPENBLAS_CORETYPE set to it
//                                 (ctest's blas.* entries, CMakeLists.txt),
//                                 after checking that OpenBLAS runs on it
// Exits 77 (ctest's skip) on a CPU without AVX2 and FMA.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <string>

#include "kernels/cpu/gemm.h"

namespace {

constexpr const char* kCheckedFlag = "MPIASR_OTHER_BLAS_CORE_CHECKED";

std::string other_core() {
  const mpiasr::CpuVectorFeatures cpu = mpiasr::cpu_vector_features();
  if (cpu.avx512) return "Haswell";
  if (cpu.avx2_fma) return "Sandybridge";
  return "";
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
    std::cout << "skipped: this CPU has no AVX2 and FMA, so no OpenBLAS core of another class "
                 "is chosen for it\n";
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
