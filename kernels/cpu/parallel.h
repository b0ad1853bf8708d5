// When the CPU kernels go parallel: an OpenMP team costs a few microseconds to
// wake and join (and far more on a loaded machine), so loops with less work
// than this run on the calling thread. Work is counted in elements touched
// (elementwise ops) or multiply-adds (GEMM).
#pragma once

#include <cstdint>

namespace mpiasr {

constexpr int64_t kParallelMinElements = int64_t(1) << 15;
constexpr int64_t kParallelMinMultiplyAdds = int64_t(1) << 19;

inline bool parallel_worth(int64_t elements) {
  return elements >= kParallelMinElements;
}

}  // namespace mpiasr
