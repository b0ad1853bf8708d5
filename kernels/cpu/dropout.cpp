// Dropout by Philox blocks: each block of four random values serves four
// consecutive elements (see dropout.h).
#include "kernels/cpu/dropout.h"

#include <cstring>

#include "kernels/cpu/parallel.h"
#include "kernels/philox.h"
#include "src/error.h"

namespace mpiasr {

template <typename T>
void cpu_dropout_forward(T* out, const T* inp, float p, uint64_t seed, uint64_t offset, size_t n) {
  MPIASR_CHECK(p >= 0.0f && p <= 1.0f, "dropout probability " << p << " is outside [0, 1]");
  if (p == 0.0f) {
    if (out != inp) std::memcpy(out, inp, sizeof(T) * n);
    return;
  }
  if (p == 1.0f) {
    std::memset(out, 0, sizeof(T) * n);
    return;
  }
  if (n == 0) return;
  const T scale = T(1) / (T(1) - T(p));
  // Element i has stream index g = offset + i, which is lane g % 4 of block g / 4.
  const int64_t first_block = int64_t(offset >> 2);
  const int64_t end_block = int64_t((offset + n + 3) >> 2);
#pragma omp parallel for schedule(static) if (parallel_worth(int64_t(n)))
  for (int64_t block = first_block; block < end_block; ++block) {
    const Philox4x32Block values = philox_block(seed, uint64_t(block));
    for (int lane = 0; lane < 4; ++lane) {
      const uint64_t g = uint64_t(block) * 4 + lane;
      if (g < offset || g - offset >= n) continue;
      const size_t i = g - offset;
      out[i] = philox_uniform(values.v[lane]) >= p ? inp[i] * scale : T(0);
    }
  }
}

template <typename T>
void cpu_dropout_backward(T* dinp, const T* dout, float p, uint64_t seed, uint64_t offset,
                          size_t n) {
  // The gradient passes through the same mask with the same scale.
  cpu_dropout_forward(dinp, dout, p, seed, offset, n);
}

template void cpu_dropout_forward<float>(float*, const float*, float, uint64_t, uint64_t, size_t);
template void cpu_dropout_forward<double>(double*, const double*, float, uint64_t, uint64_t,
                                          size_t);
template void cpu_dropout_backward<float>(float*, const float*, float, uint64_t, uint64_t, size_t);
template void cpu_dropout_backward<double>(double*, const double*, float, uint64_t, uint64_t,
                                           size_t);

}  // namespace mpiasr
