// The emulation build's stand-in for the CUDA toolkit's <cuda_fp16.h>.
#pragma once

#include "kernels/cuda_emu/simt.h"
