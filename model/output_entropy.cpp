// The entropy of the model's outputs and its gradient; see output_entropy.h.
#include "model/output_entropy.h"

#include <algorithm>
#include <cmath>

#include "src/base/error.h"

namespace mpiasr {

template <typename T>
OutputEntropy output_entropy(const T* logprobs, int frames, int vocab, double temperature,
                             double* dlogits) {
  MPIASR_CHECK(frames >= 1 && vocab >= 2 && temperature > 0,
               "output entropy of " << frames << " frames x " << vocab << " outputs at temperature "
                                    << temperature);
  std::vector<char> used(static_cast<size_t>(frames));
  int count = 0;
  for (int t = 0; t < frames; ++t) {
    const T* row = logprobs + size_t(t) * size_t(vocab);
    used[size_t(t)] = std::max_element(row, row + vocab) != row;  // ties count as the blank
    count += used[size_t(t)];
  }
  if (count == 0) {
    std::fill(used.begin(), used.end(), char(1));
    count = frames;
  }
  OutputEntropy result;
  result.frames_used = count;
  std::vector<double> log_q(static_cast<size_t>(vocab));
  for (int t = 0; t < frames; ++t) {
    double* grad = dlogits ? dlogits + size_t(t) * size_t(vocab) : nullptr;
    if (!used[size_t(t)]) {
      if (grad) std::fill(grad, grad + vocab, 0.0);
      continue;
    }
    // log q = lp / tau - logsumexp(lp / tau), from the largest term.
    const T* row = logprobs + size_t(t) * size_t(vocab);
    const double top = double(*std::max_element(row, row + vocab)) / temperature;
    double sum = 0;
    for (int k = 0; k < vocab; ++k) sum += std::exp(double(row[k]) / temperature - top);
    const double log_norm = top + std::log(sum);
    double entropy = 0;
    for (int k = 0; k < vocab; ++k) {
      log_q[size_t(k)] = double(row[k]) / temperature - log_norm;
      entropy -= std::exp(log_q[size_t(k)]) * log_q[size_t(k)];
    }
    result.value += entropy / count;
    if (grad) {
      const double scale = -1.0 / (temperature * count);
      for (int k = 0; k < vocab; ++k) {
        grad[k] = scale * std::exp(log_q[size_t(k)]) * (log_q[size_t(k)] + entropy);
      }
    }
  }
  return result;
}

template OutputEntropy output_entropy<float>(const float*, int, int, double, double*);
template OutputEntropy output_entropy<double>(const double*, int, int, double, double*);

}  // namespace mpiasr
