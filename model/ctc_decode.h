// Greedy CTC decoding: for each utterance take the most likely token of every
// valid frame (argmax over V, the lowest id on ties), merge runs of the same
// token, then drop the blanks (id 0). "a a _ a b" -> "a a b".
//
//   logprobs [B, T, V] float, host memory; frames t >= lengths[b] are padding
//   lengths [B]        valid frames per utterance (<= T)
#pragma once

#include <cstdint>
#include <vector>

namespace mpiasr {

// Greedy decoding of an utterance whose frames arrive in pieces (decoded in
// windows): the tokens of ctc_greedy_decode_one on all its frames.
class CtcGreedyStream {
 public:
  // The next `frames` frames, logprobs [frames, V].
  void push(const float* logprobs, int frames, int V);
  const std::vector<int32_t>& tokens() const { return tokens_; }

 private:
  std::vector<int32_t> tokens_;
  int32_t previous_ = 0;  // the best token of the last frame pushed
};

// The token ids of one utterance from its frames logprobs [frames, V].
std::vector<int32_t> ctc_greedy_decode_one(const float* logprobs, int frames, int V);

// The token ids of every utterance of a padded batch.
std::vector<std::vector<int32_t>> ctc_greedy_decode(const float* logprobs, const int32_t* lengths,
                                                    int B, int T, int V);

}  // namespace mpiasr
