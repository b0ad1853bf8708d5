// Decoding long utterances in overlapping windows; see chunked_decoding.h.
#include "src/chunked_decoding.h"

#include "model/presets.h"
#include "src/base/error.h"

namespace mpiasr {

std::vector<DecodeWindow> decode_windows(int input_frames, const DecodeWindowing& windowing) {
  const int window = windowing.window, stride = window - 2 * windowing.margin;
  MPIASR_CHECK(stride >= 4 && stride % 4 == 0 && windowing.margin % 4 == 0,
               "decode windows of " << window << " frames, margin " << windowing.margin);
  std::vector<DecodeWindow> windows;
  int start = 0;
  while (start + window < input_frames) {
    windows.push_back({start, window});
    start += stride;
  }
  // The last window ends at the utterance's end, starting on a multiple of 4.
  const int last = std::max(0, (input_frames - window + 3) / 4 * 4);
  windows.push_back({last, input_frames - last});
  return windows;
}

std::vector<int> stitch_plan(const std::vector<DecodeWindow>& windows, int input_frames) {
  std::vector<int> owner(size_t(subsampled_frames(input_frames)), -1);
  std::vector<int> distance(owner.size(), -1);
  for (size_t w = 0; w < windows.size(); ++w) {
    const int first = windows[w].start / 4, count = subsampled_frames(windows[w].frames);
    for (int j = 0; j < count; ++j) {
      const size_t t = size_t(first + j);
      const int from_edge = std::min(j, count - 1 - j);
      if (t < owner.size() && from_edge > distance[t]) {
        owner[t] = int(w);
        distance[t] = from_edge;
      }
    }
  }
  for (size_t t = 0; t < owner.size(); ++t) {
    MPIASR_CHECK(owner[t] >= 0, "output frame " << t << " of " << input_frames
                                                << " input frames is in no decode window");
  }
  return owner;
}

}  // namespace mpiasr
