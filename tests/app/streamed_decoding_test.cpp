// Decoding a long file from features streamed window by window (evaluate's
// path for an utterance over the decode window, io/feature_stream.h) against
// the whole-file path as the reference (the same utterance through the
// loader, which evaluate takes when it is given `outputs`): the same
// hypotheses, losses and totals, bit for bit, greedy and with the beam
// search, for windows that cut the frames in awkward places, with resampled
// stereo audio and per-utterance CMVN.
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "io/audio.h"
#include "io/char_tokenizer.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/presets.h"
#include "src/batch_plan.h"
#include "src/decoding.h"
#include "src/evaluation.h"
#include "tests/base/temp_dir.h"

namespace mpiasr {
namespace {

// Interleaved noise and a tone that changes pitch every 0.3 s.
std::vector<float> audio(double seconds, int rate, int channels, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> noise(-0.05f, 0.05f);
  const int64_t frames = std::llround(seconds * rate);
  std::vector<float> out(size_t(frames) * size_t(channels));
  for (int64_t t = 0; t < frames; ++t) {
    const double pitch = 150.0 + 60.0 * double((t * 10 / (3 * rate)) % 7);
    for (int c = 0; c < channels; ++c) {
      out[size_t(t) * size_t(channels) + size_t(c)] =
          0.3f * float(std::sin(2 * M_PI * pitch * double(t) / rate)) + noise(rng);
    }
  }
  return out;
}

struct Decoded {
  EvaluationTotals totals;
  std::vector<Hypothesis> hypotheses;
};

class StreamedDecoding : public ::testing::Test {
 protected:
  StreamedDecoding() {
    // Two long files (one resampled stereo), and short ones decoded whole.
    const struct {
      double seconds;
      int rate, channels;
      double offset, duration;
    } files[] = {{11.3, 44100, 2, 0, -1},
                 {9.0, 16000, 1, 1.13, 6.71},
                 {1.2, 16000, 1, 0, -1},
                 {0.9, 22050, 1, 0, -1}};
    manifest_.path = dir_.file("m.tsv");
    int line = 0;
    for (const auto& f : files) {
      Utterance u;
      u.id = u.audio_path = dir_.file("a" + std::to_string(line) + ".wav");
      write_audio(u.audio_path, audio(f.seconds, f.rate, f.channels, uint64_t(line)), f.channels,
                  f.rate);
      u.offset = f.offset;
      u.duration = f.duration < 0 ? read_audio_info(u.audio_path).duration : f.duration;
      u.transcript = "ab cab dee";
      u.line = ++line;
      manifest_.utterances.push_back(u);
      durations_.push_back(u.duration);
    }
  }

  // evaluate() over the manifest; `whole` gives it outputs, so that long
  // utterances go through the loader whole.
  Decoded decode(const DecodeWindowing& windowing, bool per_utterance_cmvn, bool whole,
                 const CtcBeamSearch* beam) {
    BatchingConfig batching;
    std::vector<std::vector<size_t>> batches =
        evaluation_batches(durations_, batching, 0, 1, windowing.seconds);
    const BatchShapes shapes(evaluation_batch_shapes(batches, durations_, fbank_, windowing));
    ConformerConfig config = conformer_preset("tiny");
    config.vocab_size = tokenizer_.vocab_size();
    Conformer<float, float> model(backend_, config, shapes, 3);
    LoaderOptions options;
    options.workers = 0;
    options.per_utterance_cmvn = per_utterance_cmvn;
    Loader loader(manifest_, tokenizer_, fbank_, nullptr, options);
    Decoded decoded;
    BatchOutputs outputs;
    if (whole)
      outputs = [](const Batch&, const std::vector<float>&, const std::vector<int32_t>&) {};
    decoded.totals = evaluate(model, loader, std::move(batches), manifest_, tokenizer_, windowing,
                              &decoded.hypotheses, {}, beam, outputs);
    return decoded;
  }

  TempDir dir_;
  Manifest manifest_;
  std::vector<double> durations_;
  CharTokenizer tokenizer_{U" abcde"};
  Fbank fbank_{FbankOptions{}};
  CpuBackend<float> backend_{1};
};

DecodeWindowing windowing_of(int window, int margin, int group) {
  DecodeWindowing windowing;
  windowing.window = window;
  windowing.margin = margin;
  windowing.group = group;
  windowing.seconds = (window - 1) * 0.01;
  return windowing;
}

TEST_F(StreamedDecoding, StreamedLongFilesDecodeAsTheWholeFilePath) {
  const CtcBeamSearch beam(ctc_tokens(tokenizer_), nullptr, BeamSearchOptions{4});
  // Windows of 2.04 s and of 3 s, which divide no file's frames evenly.
  for (const DecodeWindowing& windowing : {windowing_of(204, 20, 2), windowing_of(300, 36, 3)}) {
    for (const bool per_utterance : {false, true}) {
      for (const CtcBeamSearch* search : {static_cast<const CtcBeamSearch*>(nullptr), &beam}) {
        const std::string what = "window " + std::to_string(windowing.window) +
                                 (per_utterance ? ", per-utterance CMVN" : "") +
                                 (search ? ", beam" : ", greedy");
        const Decoded streamed = decode(windowing, per_utterance, false, search);
        const Decoded whole = decode(windowing, per_utterance, true, search);
        ASSERT_EQ(streamed.hypotheses.size(), manifest_.utterances.size()) << what;
        ASSERT_EQ(whole.hypotheses.size(), streamed.hypotheses.size()) << what;
        for (size_t i = 0; i < whole.hypotheses.size(); ++i) {
          EXPECT_EQ(streamed.hypotheses[i].utterance, whole.hypotheses[i].utterance) << what;
          EXPECT_EQ(streamed.hypotheses[i].text, whole.hypotheses[i].text) << what << " " << i;
        }
        // Not a comparison of empty hypotheses: the random model says something.
        EXPECT_FALSE(streamed.hypotheses[0].text.empty()) << what;
        EXPECT_FALSE(streamed.hypotheses[1].text.empty()) << what;
        EXPECT_EQ(streamed.totals.loss, whole.totals.loss) << what;
        EXPECT_GT(streamed.totals.loss, 0) << what;
        EXPECT_EQ(streamed.totals.tokens, whole.totals.tokens) << what;
        EXPECT_EQ(streamed.totals.infeasible, whole.totals.infeasible) << what;
        EXPECT_EQ(streamed.totals.audio_seconds, whole.totals.audio_seconds) << what;
        EXPECT_EQ(streamed.totals.errors.char_errors, whole.totals.errors.char_errors) << what;
      }
    }
  }
}

}  // namespace
}  // namespace mpiasr
