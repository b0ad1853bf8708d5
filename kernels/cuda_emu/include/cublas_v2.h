// The emulation build's stand-in for the CUDA toolkit's <cublas_v2.h>.
#pragma once

#include "kernels/cuda_emu/cublas.h"
