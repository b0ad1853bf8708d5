// Launcher of the CTC loss kernel with its gradient (kernels/cuda/ctc_loss.cu),
// over the fp32 log-probs of kernels/cuda/log_softmax.h.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mpiasr {

// Where each utterance's data lies in the device arrays of one CTC call,
// computed on the host from the host length arrays. The targets go to the
// device padded to [B, target_stride], the longest rounded up to 32 tokens,
// so that the argument arrays of batches alike in size and longest target
// have the same sizes (a step graph's arguments keep their places).
struct CtcLayout {
  std::vector<int64_t> target_offsets;   // [B] into the padded targets: b target_stride
  std::vector<int64_t> scratch_offsets;  // [B] into the double scratch
  size_t scratch_doubles = 0;            // frames (2 L + 1) summed over utterances
  int max_target_length = 0;
  int target_stride = 0;
};
CtcLayout ctc_layout(const int32_t* target_lengths, const int32_t* input_lengths, int B);

// The longest target the kernel takes (its shared memory grows with it).
int cuda_ctc_max_target_length();

// Device arrays of one call (all [B] unless noted).
struct CtcDeviceArgs {
  const int32_t* targets = nullptr;  // concatenated, [sum target_lengths]
  const int64_t* target_offsets = nullptr;
  const int32_t* target_lengths = nullptr;
  const int32_t* input_lengths = nullptr;
  const double* grad_scale = nullptr;  // may be null when dlogits is null
  const float* loss_scale = nullptr;   // one float multiplying grad_scale; null: 1
  const int64_t* scratch_offsets = nullptr;
  double* scratch = nullptr;  // CtcLayout::scratch_doubles
};

// losses [B] (device) = -log p(y_b | x_b), +inf when infeasible; dlogits
// [B, T, V] (may be null) = grad_scale[b] * loss_scale (softmax - occupancy)
// at valid frames, 0 elsewhere, in G = __half or __nv_bfloat16. loss_sum
// (device, may be null) += losses[b] over the utterances whose grad_scale is
// not 0 (all without grad_scale), in order. max_target_length from ctc_layout.
template <typename G>
void cuda_ctc_loss(double* losses, G* dlogits, const float* logprobs, const CtcDeviceArgs& args,
                   int B, int T, int V, int max_target_length, double* loss_sum,
                   cudaStream_t stream);

}  // namespace mpiasr
