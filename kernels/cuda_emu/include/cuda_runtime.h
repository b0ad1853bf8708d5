// The emulation build's stand-in for the CUDA toolkit's <cuda_runtime.h>: the
// runtime API and, as nvcc makes visible in every .cu file, the device language.
#pragma once

#include "kernels/cuda_emu/runtime.h"
