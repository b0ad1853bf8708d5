// The output prior of a training set; see output_prior.h.
#include "src/output_prior.h"

#include <algorithm>
#include <cmath>

#include "src/base/error.h"
#include "src/utterance_length.h"

namespace mpiasr {

std::vector<double> output_log_prior(const Manifest& manifest, const Tokenizer& tokenizer,
                                     const Fbank& fbank) {
  std::vector<double> counts(size_t(tokenizer.vocab_size()), 0.0);
  double frames = 0, tokens = 0;
  for (const Utterance& utterance : manifest.utterances) {
    frames += output_frames_of(utterance.duration, fbank);
    for (int id : tokenizer.encode(utterance.transcript)) {
      counts[size_t(id)] += 1;
      tokens += 1;
    }
  }
  if (tokens >= frames) {
    MPIASR_FAIL(ExitCode::kBadInput, manifest.path << ": the transcripts' " << tokens
                                                   << " tokens need every one of the " << frames
                                                   << " output frames");
  }
  std::vector<double> log_prior(counts.size());
  log_prior[0] = std::log((frames - tokens) / frames);
  for (size_t id = 1; id < counts.size(); ++id) {
    log_prior[id] = std::log(std::max(counts[id], 1.0) / frames);
  }
  return log_prior;
}

}  // namespace mpiasr
