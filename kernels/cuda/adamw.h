// Launchers of the optimizer kernels (kernels/cuda/adamw.cu): fused AdamW on
// fp32 masters with their compute copy (T = __half or __nv_bfloat16), the
// step decision before it and the gradient checks it takes.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

#include "kernels/step_control.h"

namespace mpiasr {

// Blocks of the first reduction stage; partials hold this many doubles.
constexpr int kReductionBlocks = 1024;

// AdamW (kernels/adamw_math.h) with the coefficients of the step *control
// (device) decided on every segment of segments [segment_count] (device, by
// increasing state_offset, moments within [0, state_elements)), one launch,
// then w_act = (T) w when w_act is not null; nothing when the control skipped
// the step.
template <typename T>
void cuda_adamw_step(float* w, T* w_act, const float* g, float* m, float* v,
                     const AdamWSegment* segments, int segment_count, size_t state_elements,
                     const AdamWHyper& hyper, const StepControl* control, cudaStream_t stream);

// decide_step (kernels/step_control.h) on *control (device), one thread.
void cuda_decide_step(StepControl* control, const StepRule& rule, cudaStream_t stream);

// *sum (device) += sum of g[i]^2 in double, reduced in a fixed order;
// partials [kReductionBlocks] is scratch.
void cuda_add_sum_squares(double* sum, const float* g, size_t n, double* partials,
                          cudaStream_t stream);

}  // namespace mpiasr
