// CTC loss and its gradient on the CPU, blank = 0, for a padded batch.
//
//   logprobs [B, T, V]  log-softmax outputs; frames t >= input_lengths[b] are padding
//   targets             int32, the B target sequences concatenated (tokens in [1, V))
//   target_lengths [B], input_lengths [B] (input_lengths[b] <= T)
//   losses [B]          -log p(y_b | x_b), +inf when no alignment fits in the input
//                       (input_lengths[b] < target length + repeated labels)
//   dlogits [B, T, V]   grad_scale[b] * d losses[b] / d logits (through the
//                       log-softmax) = grad_scale[b] * (softmax - occupancy);
//                       zero at padded frames and for utterances whose loss is
//                       +inf. Null: only the losses are computed.
//   grad_scale [B]      per-utterance factor on the gradient (the caller divides
//                       by the global token count and zeroes what it drops)
//
// The alpha-beta recursions (kernels/ctc_math.h) run in double whatever Real
// is; utterances run in parallel (OpenMP). Real is float or double.
#pragma once

#include <cstdint>
#include <vector>

namespace mpiasr {

template <typename Real>
void cpu_ctc_loss(double* losses, Real* dlogits, const Real* logprobs, const int32_t* targets,
                  const int32_t* target_lengths, const int32_t* input_lengths,
                  const double* grad_scale, int B, int T, int V);

// The loss of one utterance whose log-probs arrive in pieces (decoded in
// windows), by the forward recursion alone: what cpu_ctc_loss gives for it,
// holding two rows of 2L + 1 states instead of every frame's.
class CtcForwardLoss {
 public:
  // target [L] (tokens in [1, V)), over `frames` frames.
  CtcForwardLoss(std::vector<int32_t> target, int frames);
  // The next `count` frames, logprobs [count, V].
  void push(const float* logprobs, int count, int V);
  // -log p(y | x) once every frame is pushed, +inf when no alignment fits.
  double loss() const;

 private:
  std::vector<int32_t> target_;
  int frames_ = 0, pushed_ = 0;
  std::vector<double> alpha_, next_;  // [2L + 1]: the last frame pushed
};

}  // namespace mpiasr
