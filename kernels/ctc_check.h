// The checks of CTC arguments, one implementation for the CPU backend, the
// CUDA backend and the model (which checks a batch's targets before its
// forward pass, to name the utterance at fault as bad input):
//   targets         B sequences concatenated; sequence b has target_lengths[b] >= 0
//                   tokens, each in [1, V) (0 is the blank)
//   input_lengths   [B], each in [0, T]
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace mpiasr {

// What is wrong with the first malformed target sequence: a negative length
// ("target length -1") or a token outside [1, V) ("target token 7 at
// position 1, outside [1, 7) (0 is the blank)").
struct CtcTargetProblem {
  int utterance = 0;
  std::string what;
};

// The first problem of the B target sequences, or nullopt when there is none.
std::optional<CtcTargetProblem> find_ctc_target_problem(const int32_t* targets,
                                                        const int32_t* target_lengths, int B,
                                                        int V);

// Checks the shape, the input lengths and the targets of one ctc_loss call;
// throws Error (kFailure: the caller checked its input before) naming the
// utterance and the value at fault.
void check_ctc_arguments(const int32_t* targets, const int32_t* target_lengths,
                         const int32_t* input_lengths, int B, int T, int V);

}  // namespace mpiasr
