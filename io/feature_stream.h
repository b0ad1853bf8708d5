// The evaluation features of one audio segment, computed a window at a time
// as a decoder asks for them, so that a file of any length is featurized in
// bounded memory:
//
//   samples   AudioStream (io/audio.h): read, downmixed and resampled a
//             piece of at most 16384 frames at a time
//   frames    Fbank::compute_frames on the samples held: frame t is computed
//             once the samples up to frame_start(t) + n_fft + 1 have arrived
//             (all of them at the end of the segment, where frames reflect)
//   CMVN      the global statistics, or the segment's own (per-utterance
//             CMVN), taken in a first pass over the audio
//
// Held: the samples from the next frame to compute (at least the last
// n_fft + 2 received, for the reflection at the end), and the features from
// the first frame still asked for. The features are those of the loader's
// whole-segment path (read_audio, Fbank::compute, Cmvn::apply or
// normalize_per_utterance), bit for bit. Without dither, speed perturbation
// or SpecAugment: evaluation features only.
//
// Features: float [frames, n_mels], row-major.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "io/audio.h"
#include "io/cmvn.h"
#include "io/fbank.h"

namespace mpiasr {

class FeatureStream {
 public:
  // fbank and cmvn (null: none) must outlive the stream; per_utterance_cmvn
  // excludes cmvn. Throws Error(kBadInput) as read_audio does.
  FeatureStream(const std::string& path, double offset, double duration, const Fbank& fbank,
                const Cmvn* cmvn, bool per_utterance_cmvn);
  FeatureStream(const FeatureStream&) = delete;
  FeatureStream& operator=(const FeatureStream&) = delete;

  int frames() const { return frames_; }
  // Samples of the segment at the fbank's rate.
  int64_t samples() const { return audio_.samples(); }
  // Features of frames [first, end): first never below an earlier call's
  // (the frames before it are dropped) and end <= frames(). Valid until the
  // next call.
  const float* features(int first, int end);

 private:
  // Computes frames until computed_ reaches `end`, reading audio as needed.
  void compute_until(int end);

  const Fbank& fbank_;
  const Cmvn* cmvn_;
  std::optional<Cmvn> own_cmvn_;  // per-utterance CMVN
  SoundFile file_;
  AudioStream audio_;
  int frames_ = 0;
  std::vector<float> samples_, piece_;  // samples [samples_first_, samples_first_ + size)
  long samples_first_ = 0;
  bool audio_done_ = false;
  std::vector<float> features_;  // frames [features_first_, computed_)
  int features_first_ = 0, computed_ = 0;
};

}  // namespace mpiasr
