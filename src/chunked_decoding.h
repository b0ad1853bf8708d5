// Decoding an utterance longer than the decode window in overlapping
// windows, so eval and transcribe decode audio of any length in the
// activation memory the model was planned for (model/batch_shapes.h): a
// 10-minute file used to ask for a model planned for 60000 frames, tens of
// GB of attention scores. decode_in_windows asks for the features a group
// of windows at a time (io/feature_stream.h computes them as they are asked
// for) and hands on the log-probs as they are decided, so neither is held
// whole.
//
//   window    DecodeWindowing (src/batch_plan.h): the frames of the longest
//             utterance the model trained on
//   windows   start at multiples of 4 input frames, every window - 2 x margin
//             frames (margin = window / 8); the last one ends where the
//             utterance ends. With start s a multiple of the x4 subsampling's
//             stride, output frame j of a window is output frame s / 4 + j of
//             the utterance: T2(s + r) = s / 4 + T2(r).
//   stitching each output frame of the utterance is taken from the window in
//             which it lies farthest from an edge (edge frames see the least
//             context), so every frame but the utterance's first and last
//             margin / 4 has at least margin / 4 output frames of context on
//             each side.
// The windows go through Conformer::infer in batches of at most `group`
// (as many windows as the batch budget holds).
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "io/fbank.h"
#include "model/batch_view.h"
#include "model/conformer.h"
#include "model/presets.h"
#include "src/base/error.h"
#include "src/batch_plan.h"

namespace mpiasr {

struct DecodeWindow {
  int start = 0;   // first input frame, a multiple of 4
  int frames = 0;  // input frames, at most the window
};

// The windows over an utterance of `input_frames` (> windowing.window).
std::vector<DecodeWindow> decode_windows(int input_frames, const DecodeWindowing& windowing);

// For each output frame of the utterance, the window it is taken from.
std::vector<int> stitch_plan(const std::vector<DecodeWindow>& windows, int input_frames);

// Decodes one utterance of `input_frames` frames in windows, asking
// `features(first, end)` for the features of frames [first, end) (first
// never going back: a FeatureStream) one group of windows at a time, and
// hands `emit(logprobs, first_frame, count)` the log-probs [count, V] of
// its output frames [first_frame, first_frame + count), every output frame
// once and in order. Holds the features and log-probs of one group of
// windows, whatever the utterance's length. `utterance_index` names it in
// the model's messages.
template <typename Act, typename Acc, typename Features, typename Emit>
void decode_in_windows(Conformer<Act, Acc>& model, int input_frames, int n_mels,
                       const DecodeWindowing& windowing, size_t utterance_index,
                       Features&& features, Emit&& emit) {
  const std::vector<DecodeWindow> windows = decode_windows(input_frames, windowing);
  const std::vector<int> owner = stitch_plan(windows, input_frames);
  const int V = model.config().vocab_size;
  std::vector<float> window_logprobs;
  std::vector<int32_t> lengths;
  size_t next = 0;  // the next output frame to emit
  for (size_t first = 0; first < windows.size(); first += size_t(windowing.group)) {
    const size_t count = std::min(windows.size() - first, size_t(windowing.group));
    const int span_first = windows[first].start;
    int span_end = span_first;
    HostBatch batch;
    batch.batch_size = int(count);
    batch.n_mels = n_mels;
    for (size_t w = first; w < first + count; ++w) {
      batch.max_frames = std::max(batch.max_frames, windows[w].frames);
      span_end = std::max(span_end, windows[w].start + windows[w].frames);
    }
    const float* span = features(span_first, span_end);
    batch.features.assign(count * size_t(batch.max_frames) * size_t(n_mels), 0.0f);
    for (size_t i = 0; i < count; ++i) {
      const DecodeWindow& window = windows[first + i];
      std::copy_n(span + size_t(window.start - span_first) * size_t(n_mels),
                  size_t(window.frames) * size_t(n_mels),
                  batch.features.begin() + i * size_t(batch.max_frames) * size_t(n_mels));
      batch.frame_lengths.push_back(window.frames);
      batch.target_lengths.push_back(0);
      batch.utterance_indices.push_back(utterance_index);
    }
    model.infer(batch, window_logprobs, lengths);
    const int T2 = model.output_frames(batch.max_frames);
    // The owners rise with the output frame, so each window's frames are
    // one run, emitted once its group is decoded.
    for (size_t w = first; w < first + count; ++w) {
      const size_t run = next;
      while (next < owner.size() && size_t(owner[next]) == w) ++next;
      if (next == run) continue;
      const size_t frame = run - size_t(windows[w].start / 4);
      emit(window_logprobs.data() + ((w - first) * size_t(T2) + frame) * size_t(V), int(run),
           int(next - run));
    }
  }
  MPIASR_CHECK(next == owner.size(),
               "decode windows emitted " << next << " of " << owner.size() << " output frames");
}

// Log-probs [subsampled_frames(input_frames), V] of one utterance whose
// features are [input_frames, n_mels] at `features`, decoded in windows.
template <typename Act, typename Acc>
void infer_in_windows(Conformer<Act, Acc>& model, const float* features, int input_frames,
                      int n_mels, const DecodeWindowing& windowing, size_t utterance_index,
                      std::vector<float>& logprobs) {
  const size_t V = size_t(model.config().vocab_size);
  logprobs.assign(size_t(subsampled_frames(input_frames)) * V, 0.0f);
  decode_in_windows(
      model, input_frames, n_mels, windowing, utterance_index,
      [&](int first, int) { return features + size_t(first) * size_t(n_mels); },
      [&](const float* rows, int first, int count) {
        std::copy_n(rows, size_t(count) * V, logprobs.begin() + ptrdiff_t(size_t(first) * V));
      });
}

}  // namespace mpiasr
