// `mpiasr --version`; see build_info.h. MPIASR_VERSION, MPIASR_GIT_COMMIT and
// MPIASR_CUDA_ARCHITECTURES come from CMakeLists.txt.
#include "src/build_info.h"

#include <sstream>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/simd.h"
#include "mpi/runtime.h"
#if MPIASR_WITH_CUDA
#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include "mpi/cuda/nccl_communicator.h"
#endif

namespace mpiasr {

#if MPIASR_WITH_CUDA
namespace {

// 12040 -> "12.4".
std::string cuda_version_text(int version) {
  return std::to_string(version / 1000) + "." + std::to_string(version % 1000 / 10);
}

// The CUDA runtime built with and loaded, the driver (or that there is none)
// and cuBLASLt. Version queries only: they need no device and change nothing.
std::string cuda_versions() {
  std::string text = "CUDA runtime " + cuda_version_text(CUDART_VERSION) + " (built)";
  int runtime = 0, driver = 0;
  if (cudaRuntimeGetVersion(&runtime) == cudaSuccess) {
    text += ", " + cuda_version_text(runtime) + " (loaded)";
  }
  text += cudaDriverGetVersion(&driver) == cudaSuccess && driver > 0
              ? ", driver " + cuda_version_text(driver)
              : ", no driver";
  (void)cudaGetLastError();
  // cuBLASLt numbers its versions major * 10000 + minor * 100 + patch.
  const size_t lt = cublasLtGetVersion();
  return text + "; cuBLASLt " + std::to_string(lt / 10000) + "." + std::to_string(lt / 100 % 100) +
         "." + std::to_string(lt % 100);
}

}  // namespace
#endif

std::string version_text() {
  std::ostringstream out;
  out << "mpiasr " << MPIASR_VERSION << "\n"
      << "commit: " << MPIASR_GIT_COMMIT << "\n";
#if MPIASR_WITH_CUDA
  out << "CUDA: " << cuda_versions() << "; architectures " << MPIASR_CUDA_ARCHITECTURES << "; NCCL "
      << mpi::nccl_version() << "\n";
#else
  out << "CUDA: not built (CPU only)\n";
#endif
  out << "MPI: " << mpi::mpi_library_version() << "\n"
      << "BLAS: " << blas_description() << "\n"
      << "cpu kernels: " << simd_description() << "\n"
      << "OpenMP: " << openmp_wait_settings() << "\n"
      << "compiler: "
#if defined(__clang__)
      << "Clang " << __clang_major__ << "." << __clang_minor__ << "." << __clang_patchlevel__
#elif defined(__GNUC__)
      << "GCC " << __GNUC__ << "." << __GNUC_MINOR__ << "." << __GNUC_PATCHLEVEL__
#endif
      << ", C++ " << __cplusplus;
  return out.str();
}

}  // namespace mpiasr
