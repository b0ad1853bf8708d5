// Batch shapes for the model's activation memory; see batch_plan.h.
#include "src/batch_plan.h"

#include <algorithm>
#include <cmath>

#include "io/audio.h"
#include "io/loader.h"

namespace mpiasr {

int max_feature_frames(double seconds, const Fbank& fbank) {
  return fbank.num_frames(size_t((seconds + kSegmentEndTolerance) * fbank.options().sample_rate) +
                          1);
}

std::vector<BatchShape> sampler_batch_shapes(const std::vector<double>& durations,
                                             const BatchingConfig& batching, const Fbank& fbank,
                                             double stretch) {
  std::vector<double> sorted = durations;
  std::sort(sorted.begin(), sorted.end());
  if (sorted.empty()) return {};
  if (batching.mode == BatchMode::kFixed) {
    return {{std::min(batching.batch_size, int(sorted.size())),
             round_up_frames(max_feature_frames(sorted.back() * stretch, fbank),
                             batching.frame_multiple)}};
  }
  std::vector<BatchShape> shapes;
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (i + 1 < sorted.size() && sorted[i + 1] == sorted[i]) continue;  // the last of equals
    const double budget = batching.max_batch_seconds / sorted[i];
    const int most = int(std::min<double>(
        {double(batching.max_batch_utterances), double(i + 1), std::max(1.0, std::floor(budget))}));
    shapes.push_back({most, round_up_frames(max_feature_frames(sorted[i] * stretch, fbank),
                                            batching.frame_multiple)});
  }
  return shapes;
}

std::vector<BatchShape> evaluation_batch_shapes(const std::vector<std::vector<size_t>>& batches,
                                                const std::vector<double>& durations,
                                                const Fbank& fbank,
                                                const DecodeWindowing& windowing) {
  std::vector<BatchShape> shapes;
  bool windowed = false;
  for (const std::vector<size_t>& batch : batches) {
    double longest = 0;
    for (size_t i : batch) longest = std::max(longest, durations[i]);
    if (longest > windowing.seconds) {
      windowed = true;
    } else {
      shapes.push_back({int(batch.size()), max_feature_frames(longest, fbank)});
    }
  }
  if (windowed) shapes.push_back({windowing.group, windowing.window});
  return shapes;
}

std::string describe_plan(const BatchShapes& shapes) {
  return "batches of up to " + std::to_string(shapes.max_batch()) + " utterances or " +
         std::to_string(shapes.max_frames()) + " frames, at most " +
         std::to_string(shapes.input_rows()) + " utterance-frames";
}

DecodeWindowing decode_windowing(const Config& config, const Fbank& fbank) {
  const BatchingConfig& batching = config.batching;
  const bool dynamic = batching.mode == BatchMode::kDynamic;
  double seconds = config.data.max_utterance_seconds;
  if (dynamic && (seconds <= 0 || seconds > batching.max_batch_seconds)) {
    seconds = batching.max_batch_seconds;
  }
  if (seconds <= 0) seconds = 30;  // fixed batches and no length limit
  DecodeWindowing windowing;
  windowing.seconds = seconds;
  windowing.window = std::max(16, max_feature_frames(seconds, fbank) / 4 * 4);
  windowing.margin = std::min(windowing.window / 8 / 4 * 4, (windowing.window - 8) / 2 / 4 * 4);
  windowing.group = dynamic ? std::clamp(int(batching.max_batch_seconds / seconds), 1,
                                         batching.max_batch_utterances)
                            : batching.batch_size;
  return windowing;
}

}  // namespace mpiasr
