// When the CPU kernels go parallel: an OpenMP team costs a few microseconds to
// wake and join (and far more on a loaded machine), so loops with less work
// than this run on the calling thread. Work is counted in elements touched
// (elementwise ops) or multiply-adds (GEMM). And how a team shares columns,
// and how it adds up per-thread partial sums.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace mpiasr {

constexpr int64_t kParallelMinElements = int64_t(1) << 15;
constexpr int64_t kParallelMinMultiplyAdds = int64_t(1) << 19;

inline bool parallel_worth(int64_t elements) {
  return elements >= kParallelMinElements;
}

struct ColumnRange {
  int begin = 0, end = 0;
};

// Inside a parallel region: this thread's contiguous share of columns
// [0, columns) of a row of T, for loops where each thread adds into its own
// columns of one row (bias and LayerNorm parameter gradients). Shares are cut
// at multiples of a 64-byte cache line (rows start on one), as two threads
// writing one line hand it between their cores at every write: LayerNorm's
// parameter gradients at C = 144 (72 columns each) ran 0.5x as fast on 2
// threads as on 1.
template <typename T>
ColumnRange thread_columns(int columns) {
  constexpr int kLine = int(64 / sizeof(T));
  const int threads = omp_get_num_threads();
  const int per_thread = ((columns + threads - 1) / threads + kLine - 1) / kLine * kLine;
  const int begin = std::min(columns, omp_get_thread_num() * per_thread);
  return {begin, std::min(columns, begin + per_thread)};
}

// Per-thread partial sums laid end to end, `threads` buffers of `size`
// values from `partials`: adds buffers 1..threads-1 into buffer 0, in thread
// order, so the total does not depend on which thread finished first.
template <typename T>
void add_thread_partials(T* partials, int threads, size_t size) {
  for (int t = 1; t < threads; ++t) {
    const T* other = partials + size_t(t) * size;
    for (size_t e = 0; e < size; ++e) partials[e] += other[e];
  }
}

}  // namespace mpiasr
