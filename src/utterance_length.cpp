// The length check of utterances against the model; see utterance_length.h.
#include "src/utterance_length.h"

#include <cmath>
#include <iomanip>
#include <sstream>
#include <vector>

#include "kernels/ctc_math.h"
#include "model/presets.h"
#include "src/base/error.h"

namespace mpiasr {

namespace {

int feature_frames_of(double seconds, const Fbank& fbank) {
  const double samples = std::floor(seconds * fbank.options().sample_rate) - 1;
  return samples < 1 ? 0 : fbank.num_frames(size_t(samples));
}

// The shortest duration this check accepts for one output frame, rounded up
// to the millisecond the message prints.
double shortest_seconds(const Fbank& fbank) {
  size_t low = 0, high = size_t(fbank.options().sample_rate);  // one second gives a frame
  while (high - low > 1) {
    const size_t middle = (low + high) / 2;
    (subsampled_frames(fbank.num_frames(middle)) >= 1 ? high : low) = middle;
  }
  return std::ceil((double(high) + 1) / fbank.options().sample_rate * 1000) / 1000;
}

}  // namespace

int output_frames_of(double seconds, const Fbank& fbank) {
  return subsampled_frames(feature_frames_of(seconds, fbank));
}

std::optional<std::string> length_problem(double seconds, std::span<const int> tokens,
                                          const Fbank& fbank) {
  const int features = feature_frames_of(seconds, fbank);
  const int outputs = subsampled_frames(features);
  std::ostringstream what;
  what << std::fixed << std::setprecision(3);
  if (outputs < 1) {
    what << "too short: " << seconds << " s gives " << features
         << " feature frames, none after the x4 subsampling (at least " << shortest_seconds(fbank)
         << " s is needed)";
    return what.str();
  }
  const std::vector<int32_t> targets(tokens.begin(), tokens.end());
  const int needed = ctc_min_frames(targets.data(), int(targets.size()));
  if (outputs >= needed) return std::nullopt;
  what << "too short for its transcript: " << seconds << " s gives " << features
       << " feature frames, " << outputs << " after the x4 subsampling, and its " << targets.size()
       << " tokens need " << needed;
  if (needed > int(targets.size())) what << " (a blank between repeated tokens)";
  return what.str();
}

size_t check_utterance_lengths(Manifest& manifest, const Tokenizer& tokenizer, const Fbank& fbank,
                               bool skip_bad, const std::string& name, std::ostream* log) {
  std::vector<Utterance> kept;
  std::vector<InputProblem> problems;
  for (Utterance& u : manifest.utterances) {
    const std::vector<int> tokens = tokenizer.encode(u.transcript);
    if (const std::optional<std::string> problem = length_problem(u.duration, tokens, fbank)) {
      problems.push_back({manifest.path, u.line, "audio file '" + u.audio_path + "': " + *problem});
    } else {
      kept.push_back(std::move(u));
    }
  }
  if (problems.empty()) {
    manifest.utterances = std::move(kept);
    return 0;
  }
  std::ostringstream list;
  for (const InputProblem& problem : problems) list << "\n  " << to_string(problem);
  if (!skip_bad || kept.empty()) {
    MPIASR_FAIL(ExitCode::kBadInput,
                "manifest '" << manifest.path << "': " << problems.size() << " of "
                             << problems.size() + kept.size()
                             << " utterances are too short for the model"
                             << (kept.empty() ? ", and none is left"
                                              : "; fix them, or drop them with data.skip_bad=true")
                             << ":" << list.str());
  }
  if (log) {
    *log << name << ": dropped " << problems.size()
         << " utterances too short for the model:" << list.str() << "\n";
  }
  manifest.utterances = std::move(kept);
  return problems.size();
}

}  // namespace mpiasr
