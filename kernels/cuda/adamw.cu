// Optimizer kernels over the flat fp32 buffers:
//   adamw          multi-tensor: one launch for every segment of the
//                  parameters (AdamWSegment: a run of tensors with one weight
//                  decay, or a rank's piece of one when sharded). Threads
//                  grid-stride over the moments' index j in [0,
//                  state_elements); the segment holding j is found by binary
//                  search over the segments' state_offset, and element
//                  offset + (j - state_offset) of w, g gets adamw_update
//                  (kernels/adamw_math.h) in float with the coefficients of
//                  the decided step (read from the device StepControl; every
//                  thread returns at once when the step was skipped), then the
//                  compute copy w_act = (T) w (T = __half or __nv_bfloat16)
//   decide_step    one thread: kernels/step_control.h on the StepControl
//   sum_squares    sum g^2 in double added to a device double, in two stages
//                  with a fixed launch shape (kReductionBlocks blocks of
//                  kThreads grid-striding, block sums to partials, one block
//                  summing them), so the result does not depend on the device
//                  or on timing
#include "kernels/cuda/adamw.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.h"

namespace mpiasr {

namespace cuda_kernels {
namespace {

template <typename T>
__global__ void adamw_kernel(float* w, T* w_act, const float* g, float* m, float* v,
                             const AdamWSegment* segments, int segment_count, size_t state_elements,
                             AdamWHyper hyper, const StepControl* control) {
  if (!control->apply) return;
  AdamWCoefficients<float> c = adamw_coefficients<float>(*control, hyper, 0.0f);
  MPIASR_GRID_STRIDE(j, state_elements) {
    int lo = 0, hi = segment_count - 1;  // the last segment starting at or before j
    while (lo < hi) {
      const int mid = (lo + hi + 1) / 2;
      if (segments[mid].state_offset <= j) {
        lo = mid;
      } else {
        hi = mid - 1;
      }
    }
    const AdamWSegment& segment = segments[lo];
    if (j < segment.state_offset || j - segment.state_offset >= segment.count) continue;
    const size_t i = segment.offset + (j - segment.state_offset);
    c.weight_decay = segment.weight_decay;
    float wi = w[i], mi = m[j], vi = v[j];
    adamw_update(wi, mi, vi, g[i], c);
    w[i] = wi;
    m[j] = mi;
    v[j] = vi;
    if (w_act) w_act[i] = from_float<T>(wi);
  }
}

__global__ void sum_squares_partials_kernel(double* partials, const float* g, size_t n) {
  MPIASR_SHARED(double[kWarp], reduce);
  double sum = 0.0;
  MPIASR_GRID_STRIDE(i, n) sum += double(g[i]) * double(g[i]);
  sum = block_sum(sum, reduce);
  if (threadIdx.x == 0) partials[blockIdx.x] = sum;
}

__global__ void add_partials_kernel(double* result, const double* partials, int count) {
  MPIASR_SHARED(double[kWarp], reduce);
  double sum = 0.0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) sum += partials[i];
  sum = block_sum(sum, reduce);
  if (threadIdx.x == 0) *result += sum;
}

__global__ void decide_step_kernel(StepControl* control, StepRule rule) {
  decide_step(*control, rule);
}

}  // namespace
}  // namespace cuda_kernels

using namespace cuda_kernels;

template <typename T>
void cuda_adamw_step(float* w, T* w_act, const float* g, float* m, float* v,
                     const AdamWSegment* segments, int segment_count, size_t state_elements,
                     const AdamWHyper& hyper, const StepControl* control, cudaStream_t stream) {
  if (segment_count == 0 || state_elements == 0) return;
  MPIASR_LAUNCH(adamw_kernel<T>, grid_for(state_elements), kThreads, 0, stream, w, w_act, g, m, v,
                segments, segment_count, state_elements, hyper, control);
}

void cuda_decide_step(StepControl* control, const StepRule& rule, cudaStream_t stream) {
  MPIASR_LAUNCH(decide_step_kernel, 1, 1, 0, stream, control, rule);
}

void cuda_add_sum_squares(double* sum, const float* g, size_t n, double* partials,
                          cudaStream_t stream) {
  if (n == 0) return;
  MPIASR_LAUNCH(sum_squares_partials_kernel, kReductionBlocks, kThreads, 0, stream, partials, g, n);
  MPIASR_LAUNCH(add_partials_kernel, 1, kThreads, 0, stream, sum, partials, kReductionBlocks);
}

template void cuda_adamw_step<__half>(float*, __half*, const float*, float*, float*,
                                      const AdamWSegment*, int, size_t, const AdamWHyper&,
                                      const StepControl*, cudaStream_t);
template void cuda_adamw_step<__nv_bfloat16>(float*, __nv_bfloat16*, const float*, float*, float*,
                                             const AdamWSegment*, int, size_t, const AdamWHyper&,
                                             const StepControl*, cudaStream_t);

}  // namespace mpiasr
