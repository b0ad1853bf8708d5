// Features computed a window at a time (io/feature_stream.h) against the
// whole-file path as the reference: read_audio, Fbank::compute on every
// sample, then the CMVN, bit for bit. The files are resampled or not, mono
// or stereo, whole or segments; the framings are torchaudio's, Kaldi's
// snip_edges and Kaldi's centred one; the windows asked for overlap and cut
// the frames and the 16384-frame audio pieces in awkward places. The
// resampling itself is checked against one soxr call on the whole signal.
#include "io/feature_stream.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "src/base/error.h"
#include "tests/base/temp_dir.h"

namespace mpiasr {
namespace {

// Interleaved noise plus a tone, `frames` x `channels`, seeded.
std::vector<float> signal(int64_t frames, int channels, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> noise(-0.1f, 0.1f);
  std::vector<float> out(size_t(frames) * size_t(channels));
  for (int64_t t = 0; t < frames; ++t) {
    for (int c = 0; c < channels; ++c) {
      out[size_t(t) * size_t(channels) + size_t(c)] =
          0.4f * float(std::sin(0.03 * double(t) * (c + 1))) + noise(rng);
    }
  }
  return out;
}

struct Case {
  int rate;
  int channels;
  double offset, duration;  // the segment
};

// The reference: the whole segment read, featurized and normalized at once.
std::vector<float> whole_features(const std::string& path, const Case& c, const Fbank& fbank,
                                  const Cmvn* cmvn, bool per_utterance) {
  const std::vector<float> samples =
      read_audio(path, c.offset, c.duration, fbank.options().sample_rate);
  const int frames = fbank.num_frames(samples.size()), n_mels = fbank.options().n_mels;
  std::vector<float> features(size_t(frames) * size_t(n_mels));
  fbank.compute(samples.data(), samples.size(), features.data());
  if (cmvn) cmvn->apply(features.data(), frames, n_mels);
  if (per_utterance) normalize_per_utterance(features.data(), frames, n_mels);
  return features;
}

// Asks the stream for windows of `window` frames every `step` frames (the
// last one ending at the end) and checks each against the reference.
void expect_windows_match(FeatureStream& stream, const std::vector<float>& expected, int n_mels,
                          int window, int step, const std::string& what) {
  const int frames = int(expected.size()) / n_mels;
  ASSERT_EQ(stream.frames(), frames) << what;
  for (int first = 0; first < frames; first += step) {
    const int end = std::min(frames, first + window);
    const float* got = stream.features(first, end);
    for (size_t i = 0; i < size_t(end - first) * size_t(n_mels); ++i) {
      const size_t at = size_t(first) * size_t(n_mels) + i;
      ASSERT_EQ(got[i], expected[at]) << what << ": window " << first << " to " << end << ", frame "
                                      << at / size_t(n_mels) << ", bin " << at % size_t(n_mels);
    }
  }
}

TEST(FeatureStream, WindowsAreTheWholeFilesFeaturesBitForBit) {
  TempDir dir;
  FbankOptions torch_framing;
  FbankOptions kaldi = FbankOptions::kaldi();
  FbankOptions kaldi_centred = FbankOptions::kaldi();
  kaldi_centred.snip_edges = false;
  CmvnStats stats;
  stats.frames = 10;
  stats.sum.assign(80, -50.0);
  stats.sum_sq.assign(80, 300.0);
  const Cmvn global = Cmvn::from_stats(stats);
  const std::vector<Case> cases = {
      {16000, 1, 0, -1},      // no resampling
      {44100, 2, 0, -1},      // resampled, downmixed
      {8000, 1, 1.37, 2.51},  // upsampled, a segment
      {22050, 1, 0.5, -1},    // a segment to the end
  };
  int seed = 0;
  for (const Case& c : cases) {
    const std::string path = dir.file("audio" + std::to_string(seed) + ".wav");
    // 4.3 s: several 16384-frame pieces whatever the rate.
    write_audio(path, signal(std::llround(4.3 * c.rate), c.channels, uint64_t(++seed)), c.channels,
                c.rate, SampleEncoding::kFloat32);
    for (const FbankOptions& options : {torch_framing, kaldi, kaldi_centred}) {
      const Fbank fbank(options);
      for (int norm = 0; norm < 3; ++norm) {
        const Cmvn* cmvn = norm == 1 ? &global : nullptr;
        const bool per_utterance = norm == 2;
        const std::vector<float> expected = whole_features(path, c, fbank, cmvn, per_utterance);
        // Windows that overlap (as decode windows do), that abut, and
        // that are one frame long.
        for (const auto& [window, step] : {std::pair{116, 83}, {37, 37}, {1, 1}, {1000, 999}}) {
          std::ostringstream what;
          what << path << " at " << c.rate << " Hz, "
               << (!options.kaldi_compat ? "torch"
                   : options.snip_edges  ? "kaldi"
                                         : "kaldi centred")
               << ", normalization " << norm << ", windows " << window << "/" << step;
          FeatureStream stream(path, c.offset, c.duration, fbank, cmvn, per_utterance);
          expect_windows_match(stream, expected, options.n_mels, window, step, what.str());
        }
      }
    }
  }
}

TEST(FeatureStream, AskingForFramesAlreadyDroppedFails) {
  TempDir dir;
  const std::string path = dir.file("a.wav");
  write_audio(path, signal(16000, 1, 3), 1, 16000);
  const Fbank fbank{FbankOptions{}};
  FeatureStream stream(path, 0, -1, fbank, nullptr, false);
  stream.features(50, 60);
  EXPECT_THROW(stream.features(49, 60), Error);
  EXPECT_THROW(stream.features(60, stream.frames() + 1), Error);
}

TEST(AudioStream, PiecesResampledAreOneSoxrCallOnTheWholeSignal) {
  TempDir dir;
  for (const int rate : {44100, 8000, 22050}) {
    const std::string path = dir.file(std::to_string(rate) + ".wav");
    write_audio(path, signal(std::llround(5.3 * rate), 1, uint64_t(rate)), 1, rate,
                SampleEncoding::kFloat32);
    const std::vector<float> native = read_audio(path, 0, -1, 0);
    const std::vector<float> expected = Resampler(rate, 16000).resample(native);
    SoundFile file(path);
    AudioStream stream(file, 0, -1, 16000);
    EXPECT_EQ(stream.samples(), int64_t(expected.size())) << rate;
    std::vector<float> joined, piece;
    int pieces = 0;
    while (stream.next(piece)) {
      joined.insert(joined.end(), piece.begin(), piece.end());
      ++pieces;
    }
    EXPECT_GT(pieces, 2) << rate;
    ASSERT_EQ(joined.size(), expected.size()) << rate;
    for (size_t i = 0; i < joined.size(); ++i)
      ASSERT_EQ(joined[i], expected[i]) << rate << " " << i;
  }
}

TEST(FbankComputeFrames, ReadingASampleNotHeldFails) {
  const Fbank fbank{FbankOptions{}};
  std::vector<float> samples(4000, 0.1f);
  std::vector<float> out(80);
  // Frame 10 reads samples from 10 x 160 - 200 = 1400 on; 1500 onward are held.
  EXPECT_THROW(fbank.compute_frames(samples.data() + 1500, 1500, 2500, 4000, 10, 1, out.data()),
               Error);
  EXPECT_NO_THROW(fbank.compute_frames(samples.data() + 1400, 1400, 2600, 4000, 10, 1, out.data()));
}

}  // namespace
}  // namespace mpiasr
