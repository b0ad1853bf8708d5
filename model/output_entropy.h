// The entropy of the model's outputs, the objective of test-time adaptation
// (src/test_time_adaptation.h; Lin et al. 2022, "Listen, Adapt, Better WER:
// Source-free Single-utterance Test-time Adaptation for Automatic Speech
// Recognition"). For the log-probs lp_t of output frame t (the log-softmax of
// the logits z_t) and a temperature tau:
//
//   q_t = softmax(lp_t / tau) = softmax(z_t / tau)
//   H_t = -sum_k q_tk log q_tk
//   J   = (1 / |S|) sum_{t in S} H_t
//
// S: the frames whose most probable output is not the blank (id 0), or every
// frame when all of them are blank (entropy over blank frames alone would be
// lowered most by emitting more blank). The gradient with respect to the
// logits, zero outside S:
//
//   dJ/dz_tk = -(1 / (tau |S|)) q_tk (log q_tk + H_t)
//
// Layout: lp and dJ/dz are [frames, vocab], row-major.
#pragma once

#include <vector>

namespace mpiasr {

struct OutputEntropy {
  double value = 0;     // J
  int frames_used = 0;  // |S|
};

// J of logprobs [frames, vocab] (frames >= 1) and, when dlogits is not null,
// dJ/dz into dlogits [frames, vocab] (overwritten).
template <typename T>
OutputEntropy output_entropy(const T* logprobs, int frames, int vocab, double temperature,
                             double* dlogits);

extern template OutputEntropy output_entropy<float>(const float*, int, int, double, double*);
extern template OutputEntropy output_entropy<double>(const double*, int, int, double, double*);

}  // namespace mpiasr
