// The emulation build's stand-in for the CUDA toolkit's <cuda_profiler_api.h>.
#pragma once

#include "kernels/cuda_emu/runtime.h"
