// Greedy CTC decoding: argmax per frame, collapse repeats, drop blanks.
#include "model/ctc_decode.h"

#include "src/base/error.h"

namespace mpiasr {

void CtcGreedyStream::push(const float* logprobs, int frames, int V) {
  MPIASR_CHECK(V >= 1 && frames >= 0, "ctc_greedy_decode: frames " << frames << ", V " << V);
  for (int t = 0; t < frames; ++t) {
    const float* row = logprobs + static_cast<size_t>(t) * V;
    int32_t best = 0;
    for (int k = 1; k < V; ++k)
      if (row[k] > row[best]) best = k;
    if (best != 0 && best != previous_) tokens_.push_back(best);
    previous_ = best;
  }
}

std::vector<int32_t> ctc_greedy_decode_one(const float* logprobs, int frames, int V) {
  CtcGreedyStream stream;
  stream.push(logprobs, frames, V);
  return stream.tokens();
}

std::vector<std::vector<int32_t>> ctc_greedy_decode(const float* logprobs, const int32_t* lengths,
                                                    int B, int T, int V) {
  std::vector<std::vector<int32_t>> hypotheses(B);
  for (int b = 0; b < B; ++b) {
    MPIASR_CHECK(lengths[b] >= 0 && lengths[b] <= T, "ctc_greedy_decode: utterance "
                                                         << b << " has length " << lengths[b]
                                                         << ", outside [0, " << T << "]");
    hypotheses[b] = ctc_greedy_decode_one(logprobs + static_cast<size_t>(b) * T * V, lengths[b], V);
  }
  return hypotheses;
}

}  // namespace mpiasr
