// The output prior of a training set: the share of its output frames that
// each model output takes when every token of every transcript takes one
// frame and the blank takes the rest. model.prior_bias starts the CTC head's
// biases at its logarithm, so that the first steps need not learn, through
// the encoder, how often the blank and each token occur
// (docs/training-quality.md).
#pragma once

#include <vector>

#include "io/fbank.h"
#include "io/manifest.h"
#include "io/tokenizer.h"

namespace mpiasr {

// log(p) for each output id, over the utterances of `manifest` (output
// frames counted as src/utterance_length.h counts them):
//   token k   count_k / F            (a token the transcripts never use counts 1)
//   blank     (F - N) / F
// where F is the output frames of all utterances, N their tokens and count_k
// the uses of token k. Throws Error(kBadInput) when the transcripts need as
// many frames as there are (N >= F), naming both.
std::vector<double> output_log_prior(const Manifest& manifest, const Tokenizer& tokenizer,
                                     const Fbank& fbank);

}  // namespace mpiasr
