// The optimizer's tensor operations on the CPU: one AdamW step on a parameter
// tensor (math in kernels/adamw_math.h) and the sum of squares of a gradient
// (for the global norm; a non-finite sum is how loss scaling sees overflow).
// All buffers are flat [n]; Real is float or double.
#pragma once

#include <cstddef>

#include "kernels/adamw_math.h"

namespace mpiasr {

// AdamW on w, m, v [n] from g [n] with coefficients c (kernels/adamw_math.h).
// Then w_act[i] = w[i] (the compute copy), skipped when w_act is null or w.
template <typename Real>
void cpu_adamw_step(Real* w, Real* w_act, const Real* g, Real* m, Real* v, size_t n,
                    const AdamWCoefficients<Real>& c);

// sum_i g[i]^2, accumulated in double in an order fixed by n alone, so that
// the global norm, and with it the clipped update, is the same for any
// thread count and on any CPU (adamw.cpp is built without FMA contraction):
// blocks of kSumBlock elements, each summed in kSumLanes lanes (lane j takes
// elements j, j + kSumLanes, ... of the block) that are then added pairwise
// (lane j += lane j + 4, then j + 2, then j + 1); the block sums are added
// in block order.
constexpr size_t kSumBlock = 4096;
constexpr size_t kSumLanes = 8;
template <typename Real>
double cpu_sum_squares(const Real* g, size_t n);

}  // namespace mpiasr
