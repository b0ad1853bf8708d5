// The one place that plans the model's activation memory: the shapes of the
// batches a run will feed it (model/batch_shapes.h), from the utterances'
// durations and the batching config. Memory follows the frames a batch
// really holds, B utterances x the frames of its longest, not the most
// utterances any batch holds times the longest utterance of all: with the
// `small` config's 60 s dynamic batches, a model planned for 64 utterances
// x 30 s would hold 32 times the frames any batch has.
//
//   training    every batch the sampler can make: dynamic, for each duration
//               d as a batch's longest, the most utterances the budget allows
//               (B x d <= max_batch_seconds, B <= max_batch_utterances, and
//               no more than there are utterances of at most d); fixed,
//               batch_size x the longest
//   evaluation  the evaluation batches themselves, and for utterances longer
//               than the decode window, `group` windows (src/chunked_decoding.h)
//
// The decode window: data.max_utterance_seconds (the longest utterance the
// model trained on; batching.max_batch_seconds when that is 0 or more, 30 s
// with fixed batches and no limit), its frames, a margin of 1/8 of it on
// each side (a multiple of 4 frames), and as many windows per batch as the
// budget holds (max_batch_seconds / window seconds, or batch_size).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "io/fbank.h"
#include "model/batch_shapes.h"
#include "src/config.h"

namespace mpiasr {

// The most feature frames `seconds` of audio can give, with a margin for
// resampling and rounding.
int max_feature_frames(double seconds, const Fbank& fbank);

struct DecodeWindowing {
  int window = 0;      // input frames of a window (a multiple of 4)
  int margin = 0;      // input frames each window overlaps its neighbour with, per side
  int group = 1;       // windows per batch
  double seconds = 0;  // utterances longer than this are decoded in windows
};

// The windowing of a run's config (see above); window >= 16 frames.
DecodeWindowing decode_windowing(const Config& config, const Fbank& fbank);

// The shapes of every batch the sampler can make of `durations`, each
// utterance's audio lengthened by up to `stretch` (speed perturbation; the
// sampler's budget counts the durations as written), and the frames padded
// to batching.frame_multiple as the loader pads them.
std::vector<BatchShape> sampler_batch_shapes(const std::vector<double>& durations,
                                             const BatchingConfig& batching, const Fbank& fbank,
                                             double stretch = 1.0);

// The shapes of `batches` (utterance indices into `durations`); a batch whose
// longest utterance is longer than the window's seconds (alone in its batch:
// evaluation_batches) is decoded in windows, windowing.group at a time.
std::vector<BatchShape> evaluation_batch_shapes(const std::vector<std::vector<size_t>>& batches,
                                                const std::vector<double>& durations,
                                                const Fbank& fbank,
                                                const DecodeWindowing& windowing);

// "batches of up to 12 utterances or 3000 frames, at most 6400 utterance-frames".
std::string describe_plan(const BatchShapes& shapes);

}  // namespace mpiasr
