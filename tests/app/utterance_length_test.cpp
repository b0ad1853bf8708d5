// The length check of utterances against the model: the output frames it
// counts from a duration are never more than the loader gives for that audio
// (written, read, resampled and cut into frames here) and at most one fewer;
// CTC's need for a blank between repeated tokens counts; short utterances
// are listed as file:line or dropped with skip_bad.
#include "src/utterance_length.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <vector>

#include "io/audio.h"
#include "io/char_tokenizer.h"
#include "model/presets.h"
#include "src/base/error.h"
#include "src/config.h"
#include "src/feature_pipeline.h"
#include "tests/base/temp_dir.h"

namespace mpiasr {
namespace {

const Fbank& default_fbank() {
  static const Fbank fbank(fbank_options(FeaturesConfig{}, FeatureUse::kEvaluation));
  return fbank;
}

// The reference: what the loader's path makes of a file of `samples` samples
// at `rate`, resampled to the features' 16 kHz.
TEST(UtteranceLength, NeverMoreFramesThanTheLoaderGives) {
  TempDir dir;
  const Fbank& fbank = default_fbank();
  for (int rate : {16000, 44100, 8000}) {
    for (int samples = rate / 100; samples <= rate / 4; samples += rate / 1000 + 7) {
      write_audio(dir.file("a.wav"), std::vector<float>(size_t(samples), 0.1f), 1, rate);
      const double seconds = read_audio_info(dir.file("a.wav")).duration;
      const size_t loaded = read_audio(dir.file("a.wav"), 0, -1, 16000).size();
      const int actual = subsampled_frames(fbank.num_frames(loaded));
      const int counted = output_frames_of(seconds, fbank);
      EXPECT_LE(counted, actual) << rate << " Hz, " << samples << " samples";
      EXPECT_GE(counted, actual - 1) << rate << " Hz, " << samples << " samples";
    }
  }
}

TEST(UtteranceLength, ProblemsSayWhatIsMissing) {
  // Centred frames, 10 ms hop: frames = 1 + n / 160 for n samples counted.
  const Fbank& fbank = default_fbank();
  // 0.05 s: 799 samples counted, 5 frames, none after subsampling ((5 - 1) / 2
  // = 2 < 3); 7 frames need 960 samples, 961 counted: 0.0600625 s, 0.061 to the ms.
  EXPECT_EQ(length_problem(0.05, {}, fbank),
            "too short: 0.050 s gives 5 feature frames, none after the x4 subsampling (at least "
            "0.061 s is needed)");
  // 0.3 s: 4799 samples, 30 frames, 6 after subsampling ((30 - 1) / 2 = 14, (14 - 1) / 2 = 6).
  EXPECT_EQ(length_problem(0.3, std::vector<int>{1, 2, 3, 4, 5, 6}, fbank), std::nullopt);
  EXPECT_EQ(length_problem(0.3, std::vector<int>{1, 2, 3, 4, 5, 6, 7}, fbank),
            "too short for its transcript: 0.300 s gives 30 feature frames, 6 after the x4 "
            "subsampling, and its 7 tokens need 7");
  // Two repeats: 5 tokens need 7 frames.
  EXPECT_EQ(length_problem(0.3, std::vector<int>{1, 1, 2, 3, 3}, fbank),
            "too short for its transcript: 0.300 s gives 30 feature frames, 6 after the x4 "
            "subsampling, and its 5 tokens need 7 (a blank between repeated tokens)");
  // The shortest duration named is accepted, a millisecond less is not.
  EXPECT_EQ(output_frames_of(0.061, fbank), 1);
  EXPECT_EQ(output_frames_of(0.060, fbank), 0);
  EXPECT_EQ(length_problem(0.3, std::vector<int>{1, 2, 1, 2, 1}, fbank), std::nullopt);
}

TEST(UtteranceLength, ShortUtterancesAreListedOrDropped) {
  const auto tokenizer = CharTokenizer::from_transcripts({"abc def"});
  const std::string text =
      "ok.wav\tab\n"            // 1: 1 s
      "nothing.wav\ta\n"        // 2: no output frame
      "repeats.wav\tabcdddd\n"  // 3: 0.3 s, 6 frames, 7 tokens need 10
      "fine.wav\tabcdef\n";     // 4: 0.3 s, 6 frames, 6 tokens
  auto manifest = [&] {
    Manifest m = parse_manifest(text, "/data/m.tsv");
    const double durations[] = {1.0, 0.05, 0.3, 0.3};
    for (size_t i = 0; i < m.utterances.size(); ++i) m.utterances[i].duration = durations[i];
    return m;
  };
  Manifest strict = manifest();
  try {
    check_utterance_lengths(strict, *tokenizer, default_fbank(), false, "train", nullptr);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
    EXPECT_THAT(e.what(), testing::HasSubstr(
                              "manifest '/data/m.tsv': 2 of 4 utterances are too short for the "
                              "model; fix them, or drop them with data.skip_bad=true:"));
    EXPECT_THAT(e.what(), testing::HasSubstr("\n  /data/m.tsv:2: audio file '/data/nothing.wav': "
                                             "too short: 0.050 s gives 5 feature frames"));
    EXPECT_THAT(e.what(), testing::HasSubstr("\n  /data/m.tsv:3: audio file '/data/repeats.wav': "
                                             "too short for its transcript"));
  }
  Manifest skipped = manifest();
  std::ostringstream log;
  EXPECT_EQ(check_utterance_lengths(skipped, *tokenizer, default_fbank(), true, "train", &log), 2u);
  ASSERT_EQ(skipped.utterances.size(), 2u);
  EXPECT_EQ(skipped.utterances[0].line, 1);
  EXPECT_EQ(skipped.utterances[1].line, 4);
  EXPECT_THAT(log.str(),
              testing::StartsWith("train: dropped 2 utterances too short for the model:\n"
                                  "  /data/m.tsv:2: "));
}

}  // namespace
}  // namespace mpiasr
