// The one check of an utterance's length against the model, used by
// prepare, train's start-up and transcribe: the audio must give at least one
// output frame after the x4 subsampling, and with a transcript at least as
// many as CTC needs for its tokens, one per token plus one blank between each
// pair of repeated tokens (kernels/ctc_math.h, ctc_min_frames). Shorter
// utterances used to pass every check and stop training mid-run ("batch of
// 6 frames leaves no frame after subsampling").
//
// Frames are counted from the duration the way the loader makes them:
// floor(seconds x sample rate) - 1 samples (one less for resampling's
// rounding), Fbank::num_frames of those, subsampled_frames of that. An
// utterance this check accepts always has the frames it counts.
//
// Policy: a short utterance is a bad utterance like an unreadable file: in
// train and prepare every one is listed as file:line and the run stops (exit
// 3), or with data.skip_bad they are dropped and reported. Evaluation scores
// every utterance: one that gives no output frame decodes to an empty
// hypothesis, and transcribe warns about it.
#pragma once

#include <cstddef>
#include <optional>
#include <ostream>
#include <span>
#include <string>

#include "io/fbank.h"
#include "io/manifest.h"
#include "io/tokenizer.h"

namespace mpiasr {

// The output frames `seconds` of audio give at least (see above).
int output_frames_of(double seconds, const Fbank& fbank);

// Why an utterance of `seconds` with `tokens` (empty: no transcript) is too
// short for the model, or nullopt:
//   too short: 0.050 s gives 3 feature frames, none after the x4
//   subsampling (at least 0.080 s is needed)
//   too short for its transcript: 0.300 s gives 28 feature frames, 6 after
//   the x4 subsampling, and its 9 tokens need 11 (a blank between repeated tokens)
std::optional<std::string> length_problem(double seconds, std::span<const int> tokens,
                                          const Fbank& fbank);

// Checks every utterance of `manifest`, its transcript encoded by
// `tokenizer`. With skip_bad the short ones are dropped and reported to `log`
// as "name: dropped N utterances too short for the model:" and one
// "file:line: audio file '...': what" per utterance; otherwise Error(kBadInput)
// lists them all. Returns how many were dropped.
size_t check_utterance_lengths(Manifest& manifest, const Tokenizer& tokenizer, const Fbank& fbank,
                               bool skip_bad, const std::string& name, std::ostream* log);

}  // namespace mpiasr
