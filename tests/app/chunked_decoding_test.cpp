// Decoding long utterances in overlapping windows: the windows start on the
// subsampling's stride, cover the utterance and reach its end; each output
// frame comes from the window where it has the most context (checked against
// a stitching written here, on each window run alone through the model); an
// utterance no longer than the window decodes exactly as it would whole.
#include "src/chunked_decoding.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "model/presets.h"

namespace mpiasr {
namespace {

DecodeWindowing windowing_of(int window, int margin, int group) {
  DecodeWindowing windowing;
  windowing.window = window;
  windowing.margin = margin;
  windowing.group = group;
  return windowing;
}

TEST(DecodeWindows, CoverTheUtteranceOnTheSubsamplingStride) {
  const DecodeWindowing windowing = windowing_of(64, 8, 3);
  for (int frames = 65; frames < 2000; frames += 37) {
    const std::vector<DecodeWindow> windows = decode_windows(frames, windowing);
    ASSERT_GE(windows.size(), 2u);
    EXPECT_EQ(windows.front().start, 0);
    EXPECT_EQ(windows.back().start + windows.back().frames, frames) << frames;
    for (size_t w = 0; w < windows.size(); ++w) {
      EXPECT_EQ(windows[w].start % 4, 0);
      EXPECT_LE(windows[w].frames, windowing.window);
      if (w + 1 < windows.size()) {
        EXPECT_EQ(windows[w].frames, windowing.window);
        // Neighbours overlap by at least two margins.
        EXPECT_GE(windows[w].start + windows[w].frames - windows[w + 1].start,
                  2 * windowing.margin);
      }
    }
    // Every output frame is taken from a window that contains it, with at
    // least margin / 4 - 1 output frames of context on each side, or as many
    // as the utterance has.
    const std::vector<int> owner = stitch_plan(windows, frames);
    ASSERT_EQ(int(owner.size()), subsampled_frames(frames));
    for (int t = 0; t < int(owner.size()); ++t) {
      const DecodeWindow& window = windows[size_t(owner[size_t(t)])];
      const int j = t - window.start / 4, count = subsampled_frames(window.frames);
      ASSERT_TRUE(j >= 0 && j < count) << frames << " " << t;
      const int context = std::min(j, count - 1 - j);
      const int wanted = std::min({windowing.margin / 4 - 1, t, int(owner.size()) - 1 - t});
      EXPECT_GE(context, wanted) << frames << " frames, output frame " << t;
    }
  }
}

class InferInWindows : public ::testing::Test {
 protected:
  static constexpr int kVocab = 9, kMels = 80;

  static ConformerConfig config() {
    ConformerConfig c = conformer_preset("tiny");
    c.vocab_size = kVocab;
    c.n_mels = kMels;
    return c;
  }

  // Random features [frames, kMels].
  static std::vector<float> features(int frames, uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    std::vector<float> x(size_t(frames) * kMels);
    for (float& v : x) v = normal(rng);
    return x;
  }

  // Log-probs of rows [start, start + frames) of x, alone in a batch.
  static std::vector<float> infer_alone(Conformer<float, float>& model, const std::vector<float>& x,
                                        int start, int frames) {
    HostBatch batch;
    batch.batch_size = 1;
    batch.max_frames = frames;
    batch.n_mels = kMels;
    batch.features.assign(x.begin() + size_t(start) * kMels,
                          x.begin() + size_t(start + frames) * kMels);
    batch.frame_lengths = {frames};
    batch.target_lengths = {0};
    std::vector<float> logprobs;
    std::vector<int32_t> lengths;
    model.infer(batch, logprobs, lengths);
    return logprobs;
  }

  CpuBackend<float> backend_{1};
};

TEST_F(InferInWindows, EachFrameIsItsWindowsFrameWhereItHasTheMostContext) {
  const int frames = 203;
  const DecodeWindowing windowing = windowing_of(64, 8, 2);
  Conformer<float, float> model(backend_, config(), BatchShapes({{2, 64}, {1, 64}}), 11);
  const std::vector<float> x = features(frames, 5);
  std::vector<float> stitched;
  infer_in_windows(model, x.data(), frames, kMels, windowing, 0, stitched);
  const int T2 = subsampled_frames(frames);
  ASSERT_EQ(stitched.size(), size_t(T2) * kVocab);

  // The reference: every window alone; each output frame from the window in
  // which the fewer frames to its nearer edge are the most (the first on ties).
  const std::vector<DecodeWindow> windows = decode_windows(frames, windowing);
  std::vector<std::vector<float>> alone;
  for (const DecodeWindow& w : windows) alone.push_back(infer_alone(model, x, w.start, w.frames));
  for (int t = 0; t < T2; ++t) {
    int best = -1, best_context = -1;
    for (size_t w = 0; w < windows.size(); ++w) {
      const int j = t - windows[w].start / 4, count = subsampled_frames(windows[w].frames);
      if (j < 0 || j >= count) continue;
      const int context = std::min(j, count - 1 - j);
      if (context > best_context) best = int(w), best_context = context;
    }
    ASSERT_GE(best, 0);
    const int j = t - windows[size_t(best)].start / 4;
    for (int v = 0; v < kVocab; ++v) {
      EXPECT_NEAR(stitched[size_t(t) * kVocab + size_t(v)],
                  alone[size_t(best)][size_t(j) * kVocab + size_t(v)], 1e-4)
          << "output frame " << t << ", token " << v;
    }
  }
}

TEST_F(InferInWindows, AnUtteranceWithinTheWindowDecodesAsAWhole) {
  const int frames = 60;
  Conformer<float, float> model(backend_, config(), BatchShapes({{2, 64}}), 11);
  const std::vector<float> x = features(frames, 6);
  std::vector<float> stitched;
  infer_in_windows(model, x.data(), frames, kMels, windowing_of(64, 8, 2), 0, stitched);
  EXPECT_EQ(stitched, infer_alone(model, x, 0, frames));
}

}  // namespace
}  // namespace mpiasr
