// MPIASR_HD marks the per-element math shared by the CPU and CUDA backends:
// __host__ __device__ inline under nvcc, plain inline elsewhere, so the CPU
// tests exercise exactly the arithmetic the GPU kernels run.
#pragma once

#ifdef __CUDACC__
#define MPIASR_HD __host__ __device__ inline
#else
#define MPIASR_HD inline
#endif
