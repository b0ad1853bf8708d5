// The emulation build's stand-in for NCCL's <nccl.h>.
#pragma once

#include "kernels/cuda_emu/nccl.h"
