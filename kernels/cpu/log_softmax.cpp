// Row-wise log-softmax with the max subtracted for range safety (see log_softmax.h).
#include "kernels/cpu/log_softmax.h"

#include <cmath>
#include <cstdint>

#include "kernels/cpu/parallel.h"
#include "kernels/exp.h"

#define MPIASR_SIMD_SOURCE "kernels/cpu/log_softmax_simd.h"
#include "kernels/cpu/simd_levels.h"

namespace mpiasr {

template <typename T>
void cpu_log_softmax_forward(T* logprobs, const T* logits, int N, int V) {
  MPIASR_SIMD_CALL(cpu_log_softmax_forward, logprobs, logits, N, V);
}

template void cpu_log_softmax_forward<float>(float*, const float*, int, int);
template void cpu_log_softmax_forward<double>(double*, const double*, int, int);

}  // namespace mpiasr
