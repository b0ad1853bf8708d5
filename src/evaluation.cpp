// Evaluation batches, planning bounds and the sum over ranks; see evaluation.h.
#include "src/evaluation.h"

#include <algorithm>
#include <numeric>
#include <sstream>

#include "io/audio.h"
#include "mpi/collectives.h"
#include "src/base/error.h"

namespace mpiasr {

std::vector<std::vector<size_t>> evaluation_batches(const std::vector<double>& durations,
                                                    const BatchingConfig& batching, int rank,
                                                    int world_size, double alone_seconds) {
  std::vector<size_t> order(durations.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return durations[a] > durations[b]; });
  const bool dynamic = batching.mode == BatchMode::kDynamic;
  const size_t cap = size_t(dynamic ? batching.max_batch_utterances : batching.batch_size);
  std::vector<std::vector<size_t>> batches;
  double longest = 0;  // of the open batch (the first utterance: the order is descending)
  for (size_t k = size_t(rank); k < order.size(); k += size_t(world_size)) {
    const size_t i = order[k];
    const bool fits =
        !batches.empty() && batches.back().size() < cap && longest <= alone_seconds &&
        (!dynamic || double(batches.back().size() + 1) * longest <= batching.max_batch_seconds);
    if (!fits) {
      batches.emplace_back();
      longest = durations[i];
    }
    batches.back().push_back(i);
  }
  return batches;
}

std::string non_finite_logprobs(const float* rows, size_t frames, int V, int first_frame) {
  const size_t n = frames * size_t(V);
  const float* bad = std::find_if(rows, rows + n, [](float x) { return !std::isfinite(x); });
  if (bad == rows + n) return "";
  std::ostringstream what;
  what << "the model's log-probabilities are not finite (" << *bad << " at output frame "
       << first_frame + (bad - rows) / V << "): its weights are broken (a model that diverged?)";
  return what.str();
}

void check_finite_logprobs(const std::vector<float>& logprobs, const std::vector<int32_t>& lengths,
                           int T2, int V, const Batch& batch, const Manifest& manifest) {
  for (int b = 0; b < batch.batch_size; ++b) {
    const std::string bad =
        non_finite_logprobs(logprobs.data() + size_t(b) * T2 * V, size_t(lengths[size_t(b)]), V, 0);
    if (bad.empty()) continue;
    const Utterance& u = manifest.utterances[batch.utterance_indices[size_t(b)]];
    MPIASR_FAIL(ExitCode::kNonFinite, "utterance " << u.id << " (" << u.audio_path << ", "
                                                   << manifest.path << ":" << u.line
                                                   << "): " << bad);
  }
}

void allreduce_totals(const mpi::Context& ctx, EvaluationTotals& totals) {
  double sums[] = {totals.loss,
                   totals.tokens,
                   totals.infeasible,
                   totals.utterances,
                   totals.audio_seconds,
                   double(totals.errors.char_errors),
                   double(totals.errors.chars),
                   double(totals.errors.word_errors),
                   double(totals.errors.words)};
  mpi::allreduce_sum_inplace(ctx, sums, int(std::size(sums)), "evaluation totals");
  totals.loss = sums[0];
  totals.tokens = sums[1];
  totals.infeasible = sums[2];
  totals.utterances = sums[3];
  totals.audio_seconds = sums[4];
  totals.errors.char_errors = int64_t(sums[5]);
  totals.errors.chars = int64_t(sums[6]);
  totals.errors.word_errors = int64_t(sums[7]);
  totals.errors.words = int64_t(sums[8]);
}

}  // namespace mpiasr
