// The emulation build's stand-in for the CUDA toolkit's <cuda_runtime_api.h>: the
// runtime API, here with the device language of <cuda_runtime.h>.
#pragma once

#include "kernels/cuda_emu/runtime.h"
