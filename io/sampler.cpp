// Shuffling, duration-bucketed batching and sharding by rank; see sampler.h.
#include "io/sampler.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "src/base/error.h"
#include "src/base/rng.h"

namespace mpiasr {

namespace {

// A generator for one (seed, epoch, purpose).
SplitMix64 generator(uint64_t seed, int epoch, uint64_t purpose) {
  return SplitMix64(derive_seed({seed, static_cast<uint64_t>(epoch), purpose}));
}

template <typename T>
void shuffle(std::vector<T>& items, SplitMix64& rng) {
  for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[rng.below(i)]);
}

}  // namespace

Sampler::Sampler(std::vector<double> durations, SamplerOptions options, int rank, int world_size)
    : durations_(std::move(durations)),
      options_(std::move(options)),
      rank_(rank),
      world_size_(world_size) {
  if (world_size_ < 1 || rank_ < 0 || rank_ >= world_size_) {
    MPIASR_FAIL(ExitCode::kUsage, "sampler: rank " << rank_ << " of world size " << world_size_);
  }
  if (durations_.empty()) MPIASR_FAIL(ExitCode::kBadInput, "sampler: no utterances");
  for (size_t i = 0; i < durations_.size(); ++i) {
    if (!std::isfinite(durations_[i]) || durations_[i] <= 0) {
      MPIASR_FAIL(ExitCode::kBadInput,
                  "sampler: utterance " << i << " has duration " << durations_[i] << " s");
    }
  }
  if (options_.shortest_first_epochs < 0) {
    MPIASR_FAIL(ExitCode::kUsage, "sampler: shortest_first_epochs "
                                      << options_.shortest_first_epochs << " must be >= 0");
  }
  if (options_.step_batches < 1) {
    MPIASR_FAIL(ExitCode::kUsage,
                "sampler: step_batches " << options_.step_batches << " must be >= 1");
  }
  if (options_.mode == "fixed") {
    if (options_.batch_size < 1) {
      MPIASR_FAIL(ExitCode::kUsage,
                  "sampler: batch_size " << options_.batch_size << " must be >= 1");
    }
    return;
  }
  if (options_.mode != "dynamic") {
    MPIASR_FAIL(ExitCode::kUsage,
                "sampler: mode \"" << options_.mode << "\" (expected dynamic or fixed)");
  }
  if (!(options_.max_batch_seconds > 0) || options_.max_batch_utterances < 1) {
    MPIASR_FAIL(ExitCode::kUsage, "sampler: max_batch_seconds "
                                      << options_.max_batch_seconds << " and max_batch_utterances "
                                      << options_.max_batch_utterances << " must be positive");
  }
  for (size_t i = 0; i < durations_.size(); ++i) {
    if (durations_[i] > options_.max_batch_seconds) {
      MPIASR_FAIL(ExitCode::kBadInput,
                  "sampler: utterance "
                      << i << " is " << durations_[i]
                      << " s long, more than max_batch_seconds = " << options_.max_batch_seconds
                      << ", so no batch can hold it (drop it or raise the budget)");
    }
  }
  if (!options_.bucket_boundaries.empty()) {
    boundaries_ = options_.bucket_boundaries;
    for (size_t k = 0; k < boundaries_.size(); ++k) {
      if (!(boundaries_[k] > 0) || (k > 0 && !(boundaries_[k] > boundaries_[k - 1]))) {
        MPIASR_FAIL(ExitCode::kUsage, "sampler: bucket boundary " << k << " = " << boundaries_[k]
                                                                  << " must be positive and "
                                                                     "larger than the one before");
      }
    }
    return;
  }
  if (options_.num_buckets < 1) {
    MPIASR_FAIL(ExitCode::kUsage,
                "sampler: num_buckets " << options_.num_buckets << " must be >= 1");
  }
  std::vector<double> sorted = durations_;
  std::sort(sorted.begin(), sorted.end());
  for (int k = 1; k < options_.num_buckets; ++k) {
    double quantile = sorted[sorted.size() * k / options_.num_buckets];
    if (boundaries_.empty() || quantile > boundaries_.back()) boundaries_.push_back(quantile);
  }
}

std::vector<std::vector<size_t>> Sampler::dynamic_batches(const std::vector<size_t>& order) const {
  std::vector<std::vector<size_t>> buckets(boundaries_.size() + 1);
  for (size_t i : order) {
    size_t bucket = std::upper_bound(boundaries_.begin(), boundaries_.end(), durations_[i]) -
                    boundaries_.begin();
    buckets[bucket].push_back(i);
  }
  std::vector<std::vector<size_t>> batches;
  for (const std::vector<size_t>& bucket : buckets) {
    std::vector<size_t> batch;
    double longest = 0;
    for (size_t i : bucket) {
      double longer = std::max(longest, durations_[i]);
      bool fits = static_cast<double>(batch.size() + 1) * longer <= options_.max_batch_seconds &&
                  static_cast<int>(batch.size()) < options_.max_batch_utterances;
      if (!fits) {
        batches.push_back(std::move(batch));
        batch.clear();
        longer = durations_[i];
      }
      batch.push_back(i);
      longest = longer;
    }
    if (!batch.empty()) batches.push_back(std::move(batch));
  }
  return batches;
}

void Sampler::balance_steps(std::vector<std::vector<size_t>>& batches, int epoch) const {
  constexpr size_t kWindowSteps = 16;
  const size_t step = static_cast<size_t>(options_.step_batches);
  const auto cost = [this](const std::vector<size_t>& batch) {
    double longest = 0;
    for (size_t i : batch) longest = std::max(longest, durations_[i]);
    return static_cast<double>(batch.size()) * longest;
  };
  SplitMix64 rng = generator(options_.seed, epoch, 2);
  const size_t window = kWindowSteps * step;
  for (size_t begin = 0, end = 0; begin < batches.size(); begin = end) {
    // The last window takes the rest of the list with it.
    end = batches.size() - begin < 2 * window ? batches.size() : begin + window;
    const auto first = batches.begin() + static_cast<std::ptrdiff_t>(begin);
    const auto last = batches.begin() + static_cast<std::ptrdiff_t>(end);
    std::vector<std::pair<double, std::vector<size_t>>> sorted;
    for (auto it = first; it != last; ++it) sorted.emplace_back(cost(*it), std::move(*it));
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<size_t> runs(sorted.size() / step);  // full runs of `step`, by position
    std::iota(runs.begin(), runs.end(), size_t{0});
    shuffle(runs, rng);
    auto out = first;
    for (size_t run : runs) {
      std::vector<size_t> within(step);
      std::iota(within.begin(), within.end(), run * step);
      shuffle(within, rng);
      for (size_t k : within) *out++ = std::move(sorted[k].second);
    }
    for (size_t k = runs.size() * step; k < sorted.size(); ++k)
      *out++ = std::move(sorted[k].second);
  }
}

std::vector<std::vector<size_t>> Sampler::global_batches(int epoch) const {
  std::vector<size_t> order(durations_.size());
  std::iota(order.begin(), order.end(), size_t{0});
  SplitMix64 utterance_rng = generator(options_.seed, epoch, 0);
  shuffle(order, utterance_rng);

  std::vector<std::vector<size_t>> batches;
  if (options_.mode == "fixed") {
    size_t size = static_cast<size_t>(options_.batch_size);
    for (size_t start = 0; start < order.size(); start += size) {
      batches.emplace_back(order.begin() + start,
                           order.begin() + std::min(start + size, order.size()));
    }
  } else {
    batches = dynamic_batches(order);
  }
  if (epoch < options_.shortest_first_epochs) {
    std::vector<std::pair<double, std::vector<size_t>>> keyed;
    for (std::vector<size_t>& batch : batches) {
      double longest = 0;
      for (size_t i : batch) longest = std::max(longest, durations_[i]);
      keyed.emplace_back(longest, std::move(batch));
    }
    std::stable_sort(keyed.begin(), keyed.end(),
                     [](const auto& a, const auto& b) { return a.first < b.first; });
    for (size_t k = 0; k < keyed.size(); ++k) batches[k] = std::move(keyed[k].second);
  } else {
    SplitMix64 batch_rng = generator(options_.seed, epoch, 1);
    shuffle(batches, batch_rng);
    if (options_.step_batches > 1) balance_steps(batches, epoch);
  }

  size_t world = static_cast<size_t>(world_size_);
  size_t count = batches.size();
  if (options_.drop_last) {
    if (count < world) {
      MPIASR_FAIL(ExitCode::kUsage, "sampler: epoch " << epoch << " has " << count
                                                      << " batches, fewer than the " << world
                                                      << " ranks, and drop_last is set");
    }
    batches.resize(count - count % world);
  } else {
    for (size_t position = count; position % world != 0; ++position) {
      std::vector<size_t> repeated =
          batches[position >= world ? position - world : position % count];
      batches.push_back(std::move(repeated));
    }
  }
  return batches;
}

std::vector<std::vector<size_t>> Sampler::epoch_batches(int epoch) const {
  std::vector<std::vector<size_t>> all = global_batches(epoch);
  std::vector<std::vector<size_t>> mine;
  mine.reserve(all.size() / world_size_);
  for (size_t b = rank_; b < all.size(); b += world_size_) mine.push_back(std::move(all[b]));
  return mine;
}

size_t Sampler::batches_per_epoch(int epoch) const {
  return global_batches(epoch).size() / world_size_;
}

}  // namespace mpiasr
