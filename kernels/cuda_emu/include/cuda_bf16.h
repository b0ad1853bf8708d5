// The emulation build's stand-in for the CUDA toolkit's <cuda_bf16.h>.
#pragma once

#include "kernels/cuda_emu/simt.h"
