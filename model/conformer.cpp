#include <algorithm>
#include <cmath>

#include "model/conformer_impl.h"

namespace mpiasr {

void add_blank_statistics(BlankStatistics& stats, const float* logprobs, const int32_t* lengths,
                          int batch, int frames, int vocab) {
  for (int b = 0; b < batch; ++b) {
    for (int t = 0; t < lengths[b]; ++t) {
      const float* row = logprobs + (size_t(b) * size_t(frames) + size_t(t)) * size_t(vocab);
      stats.frames += 1;
      stats.posterior += std::exp(double(row[0]));
      stats.argmax += *std::max_element(row, row + vocab) == row[0] ? 1 : 0;
    }
  }
}

template class Conformer<float, float>;
template class Conformer<double, double>;

}  // namespace mpiasr
