// The emulation build's stand-in for the CUDA toolkit's <cublasLt.h>.
#pragma once

#include "kernels/cuda_emu/cublas_lt.h"
