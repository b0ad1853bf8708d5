// What `mpiasr --version` prints, for bug reports: the version, the commit the
// build came from (git at configure time; "unknown" outside a git checkout),
// and what the build holds: CUDA (runtime, driver, architectures compiled,
// cuBLAS, NCCL) or that it was built without it, the MPI library and the
// standard it implements, the BLAS and the kernel set it runs on this CPU,
// the OpenMP wait settings in effect (src/main.cpp sets them), the compiler.
// Needs no MPI initialization and no GPU.
#pragma once

#include <string>

namespace mpiasr {

std::string version_text();

}  // namespace mpiasr
