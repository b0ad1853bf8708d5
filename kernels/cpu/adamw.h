// The optimizer's tensor operations on the CPU: one AdamW step on a parameter
// tensor (math in kernels/adamw_math.h), the sum of squares of a gradient (for
// the global norm) and the non-finite check (for dynamic loss scaling).
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

// sum_i g[i]^2, accumulated in double.
template <typename Real>
double cpu_sum_squares(const Real* g, size_t n);

}  // namespace mpiasr
