// The emulation build's stand-in for the CUDA toolkit's <mma.h> (nvcuda::wmma).
#pragma once

#include "kernels/cuda_emu/wmma.h"
