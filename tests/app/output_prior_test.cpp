// The output prior of a training set: each token's share of the output
// frames and the blank's, from frames counted by hand; a token the
// transcripts never use counts once; transcripts that need every frame are
// an error naming the manifest.
#include "src/output_prior.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "io/char_tokenizer.h"
#include "src/base/error.h"
#include "src/config.h"
#include "src/feature_pipeline.h"

namespace mpiasr {
namespace {

Manifest manifest_of(const std::string& text, const std::vector<double>& durations) {
  Manifest manifest = parse_manifest(text, "/data/m.tsv");
  for (size_t i = 0; i < durations.size(); ++i) manifest.utterances[i].duration = durations[i];
  return manifest;
}

TEST(OutputPrior, SharesOfTheOutputFrames) {
  const Fbank fbank(fbank_options(FeaturesConfig{}, FeatureUse::kTraining));
  const auto tokenizer = CharTokenizer::from_transcripts({"abc"});  // blank, a, b, c
  // Centred frames, 10 ms hop: n = floor(16000 s) - 1 samples counted give
  // 1 + n / 160 frames, and T frames ((T - 1) / 2 - 1) / 2 after the
  // subsampling: 1 s 100 -> 24, 2 s 200 -> 49, 0.5 s 50 -> 11; 84 in all.
  const Manifest manifest = manifest_of("1.wav\tab\n2.wav\tabba\n3.wav\tb\n", {1.0, 2.0, 0.5});
  const std::vector<double> log_prior = output_log_prior(manifest, *tokenizer, fbank);
  ASSERT_EQ(log_prior.size(), 4u);
  EXPECT_NEAR(log_prior[0], std::log(77.0 / 84), 1e-12);  // 7 tokens
  EXPECT_NEAR(log_prior[1], std::log(3.0 / 84), 1e-12);   // a
  EXPECT_NEAR(log_prior[2], std::log(4.0 / 84), 1e-12);   // b
  EXPECT_NEAR(log_prior[3], std::log(1.0 / 84), 1e-12);   // c, never used
}

TEST(OutputPrior, TranscriptsThatNeedEveryFrameAreAnError) {
  const Fbank fbank(fbank_options(FeaturesConfig{}, FeatureUse::kTraining));
  const auto tokenizer = CharTokenizer::from_transcripts({"abcdef"});
  // 0.5 s: 11 output frames, 11 tokens.
  const Manifest manifest = manifest_of("1.wav\tabcdefabcde\n", {0.5});
  try {
    output_log_prior(manifest, *tokenizer, fbank);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
    EXPECT_THAT(e.what(), testing::HasSubstr("/data/m.tsv: the transcripts' 11 tokens need every "
                                             "one of the 11 output frames"));
  }
}

}  // namespace
}  // namespace mpiasr
