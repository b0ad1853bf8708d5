// MPIASR_SIMD_CLONES compiles a CPU kernel three times, for baseline x86-64
// (SSE2), x86-64-v3 (AVX2 + FMA) and x86-64-v4 (AVX-512), and picks one at
// load time from what the processor supports (GCC function multiversioning).
// The build targets baseline x86-64 for portability, which would otherwise
// leave the vectorized elementwise loops at 4 floats per instruction. On an
// AVX-512 Xeon the v4 clones ran the subsampling's first convolution and the
// depthwise convolution 1.2-1.8x, layer norm and swish 1.2-1.4x faster than
// the v3 ones. Elsewhere it is empty. (The GEMMs need none of this: OpenBLAS
// dispatches at run time itself.)
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define MPIASR_SIMD_CLONES \
  __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#else
#define MPIASR_SIMD_CLONES
#endif
