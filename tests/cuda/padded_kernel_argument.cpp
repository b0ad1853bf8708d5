// Must not compile: a launch whose struct argument has padding (3 bytes after
// `active`), which a step graph could not sign by its bytes
// (kernels/cuda/step_graph.h). The ctest entries
// emu.padded_kernel_argument_refused (for the emulator) and
// cuda.padded_kernel_argument_refused (nvcc) build it, and pass on the
// static_assert's message naming the struct.
#include <cuda_runtime.h>

#include "kernels/cuda/launch.h"

namespace mpiasr {

struct PaddedKernelArgument {
  bool active;
  int n;
};

__global__ void padded_argument_kernel(PaddedKernelArgument argument) {}

void launch_with_padded_argument(cudaStream_t stream) {
  MPIASR_LAUNCH(padded_argument_kernel, 1, 32, 0, stream, PaddedKernelArgument{true, 1});
}

}  // namespace mpiasr
