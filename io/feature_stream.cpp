// Evaluation features computed a window at a time; see feature_stream.h.
#include "io/feature_stream.h"

#include <algorithm>

#include "src/base/error.h"

namespace mpiasr {

FeatureStream::FeatureStream(const std::string& path, double offset, double duration,
                             const Fbank& fbank, const Cmvn* cmvn, bool per_utterance_cmvn)
    : fbank_(fbank),
      cmvn_(cmvn),
      file_(path),
      audio_(file_, offset, duration, fbank.options().sample_rate),
      frames_(fbank.num_frames(size_t(audio_.samples()))) {
  MPIASR_CHECK(fbank.options().dither == 0 && !(cmvn && per_utterance_cmvn),
               "feature stream of '" << path << "': dither " << fbank.options().dither
                                     << ", global and per-utterance CMVN both set");
  if (per_utterance_cmvn) {
    FeatureStream raw(path, offset, duration, fbank, nullptr, false);
    CmvnStats stats;
    constexpr int kFramesPerPass = 4096;
    const int n_mels = fbank.options().n_mels;
    for (int first = 0; first < frames_; first += kFramesPerPass) {
      const int end = std::min(frames_, first + kFramesPerPass);
      stats.accumulate(raw.features(first, end), end - first, n_mels);
    }
    if (frames_ > 0) own_cmvn_ = Cmvn::from_stats(stats, kPerUtteranceStdFloor);
  }
}

const float* FeatureStream::features(int first, int end) {
  MPIASR_CHECK(first >= features_first_ && first <= end && end <= frames_,
               "feature stream of '" << file_.path() << "': frames " << first << " to " << end
                                     << " asked for, " << features_first_ << " to " << frames_
                                     << " left");
  const size_t n_mels = size_t(fbank_.options().n_mels);
  const int drop = std::min(first, computed_) - features_first_;
  features_.erase(features_.begin(), features_.begin() + ptrdiff_t(size_t(drop) * n_mels));
  features_first_ += drop;
  if (computed_ < first) {  // frames skipped over are computed and dropped
    compute_until(first);
    features_.clear();
    features_first_ = first;
  }
  compute_until(end);
  return features_.data() + size_t(first - features_first_) * n_mels;
}

void FeatureStream::compute_until(int end) {
  const int n_fft = fbank_.options().n_fft, n_mels = fbank_.options().n_mels;
  while (computed_ < end) {
    const long received = samples_first_ + long(samples_.size());
    // Frames that read no sample past those received (reflection at the
    // start included); at the end of the audio, every frame.
    int ready = frames_;
    if (!audio_done_) {
      const long room = received - n_fft - 1 - fbank_.frame_start(0);
      ready = room < 0 ? 0 : std::min<long>(frames_, room / fbank_.frame_shift() + 1);
    }
    if (ready > computed_) {
      const int count = std::min(ready, end) - computed_;
      const size_t old_size = features_.size();
      features_.resize(old_size + size_t(count) * size_t(n_mels));
      float* rows = features_.data() + old_size;
      fbank_.compute_frames(samples_.data(), samples_first_, samples_.size(), size_t(received),
                            computed_, count, rows);
      if (cmvn_) cmvn_->apply(rows, count, n_mels);
      if (own_cmvn_) own_cmvn_->apply(rows, count, n_mels);
      computed_ += count;
      // Keep the samples the next frame reads, and the last n_fft + 2 for
      // the reflection at the end.
      const long keep =
          std::max(0L, std::min(computed_ < frames_ ? fbank_.frame_start(computed_) : received,
                                received - n_fft - 2));
      if (keep - samples_first_ >= long(samples_.size() / 2)) {
        samples_.erase(samples_.begin(), samples_.begin() + (keep - samples_first_));
        samples_first_ = keep;
      }
      continue;
    }
    MPIASR_CHECK(!audio_done_, "feature stream of '" << file_.path() << "': frame " << computed_
                                                     << " of " << frames_ << " cannot be computed");
    if (audio_.next(piece_)) {
      samples_.insert(samples_.end(), piece_.begin(), piece_.end());
    } else {
      audio_done_ = true;
      MPIASR_CHECK(received == audio_.samples(), "feature stream of '"
                                                     << file_.path() << "': " << received
                                                     << " samples resampled, " << audio_.samples()
                                                     << " expected");
    }
  }
}

}  // namespace mpiasr
