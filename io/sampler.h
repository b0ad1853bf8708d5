// The sampler: which utterances form each batch, and which rank gets which
// batch, for every epoch (DESIGN.md, distributed invariant 3).
//
// For epoch e, every rank computes the same global batch list:
//   1. the utterance indices 0..N-1 are shuffled with a generator seeded by (seed, e);
//   2. dynamic mode: utterances go to duration buckets (bucket k holds durations in
//      [boundary[k-1], boundary[k]) ), and each bucket, in shuffled order, is cut
//      greedily into batches with  B * max_duration <= max_batch_seconds  (the budget
//      counts padding: the batch is padded to its longest utterance) and
//      B <= max_batch_utterances;
//      fixed mode: the shuffled order is cut into batches of batch_size (the last may
//      be smaller); buckets are not used;
//   3. the batch list is shuffled with a second generator seeded by (seed, e);
//      except in the first shortest_first_epochs epochs (SortaGrad, Amodei et
//      al. 2016, "Deep Speech 2"), where it is sorted by its longest
//      utterance's duration instead, shortest first (stable), and neither
//      shuffled nor balanced: adjacent batches, and so each step's, are alike;
//      then, when an optimizer step takes S > 1 batches (step_batches: world
//      size x accumulation), each step's S batches are made alike in cost, so
//      that no rank waits long for a slower one at the gradient all-reduce: the
//      list is cut into windows of 16 S batches, the last window taking the
//      rest of the list (16 S to 32 S - 1 batches) so that the epoch's last
//      steps are balanced like the others; each window is sorted by cost
//      (utterances x longest duration, the padded seconds; stable), cut into
//      runs of S, and its full runs are shuffled, as are the batches within
//      each run (a third generator seeded by (seed, e)); a last run of fewer
//      than S, the window's dearest batches, stays at the end in order. Global
//      batches kS .. kS + S - 1 are step k's, for any split of S into ranks x
//      accumulation;
//   4. its length is made a multiple of the world size W: drop_last removes the last
//      (n mod W) batches; otherwise each position p >= n up to the next multiple of W
//      takes a copy of batch p - W, the batch its rank had before (batch p mod n when
//      n < W), so W - (n mod W) batches (their utterances) are seen twice in that
//      epoch; balanced, the copies are the last batches' neighbours in cost;
//   5. rank r takes batches r, r + W, r + 2W, ...  Every rank has n / W batches.
// Bucket boundaries are given (seconds, increasing), or are the duration quantiles
// k / num_buckets, k = 1..num_buckets-1.
//
// The batches depend only on (durations, options, rank, world size, epoch), so a
// resumed run's position is (epoch, index in epoch_batches(epoch)); it rebuilds the
// list and starts at that index (Loader::start_epoch's start_index). With dynamic
// batching the number of batches varies a little from epoch to epoch.
//
// The shuffles use splitmix64 and a Fisher-Yates pass of our own, so the batches are
// the same for every compiler and standard library.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mpiasr {

struct SamplerOptions {
  std::string mode = "dynamic";           // "dynamic" or "fixed"
  double max_batch_seconds = 100;         // dynamic: B * longest utterance <= this
  int max_batch_utterances = 64;          // dynamic: B <= this
  int batch_size = 8;                     // fixed
  std::vector<double> bucket_boundaries;  // dynamic: seconds, increasing; empty = quantiles
  int num_buckets = 10;                   // dynamic, when bucket_boundaries is empty
  bool drop_last = false;                 // trim the batch list instead of padding it
  int step_batches = 1;                   // batches per optimizer step; > 1 balances steps (3.)
  int shortest_first_epochs = 0;          // epochs whose batches go shortest first (3.)
  uint64_t seed = 0;
};

class Sampler {
 public:
  // durations: seconds per utterance (manifest order). Throws Error(kBadInput)
  // naming an utterance that is not positive and finite or alone exceeds the
  // dynamic budget, and Error(kUsage) for bad options or rank/world size.
  Sampler(std::vector<double> durations, SamplerOptions options, int rank, int world_size);

  // This rank's batches of the epoch, each a list of utterance indices.
  std::vector<std::vector<size_t>> epoch_batches(int epoch) const;
  // The number of batches of epoch_batches(epoch), the same on every rank.
  size_t batches_per_epoch(int epoch) const;
  // The boundaries in use (dynamic mode): given or from the quantiles.
  const std::vector<double>& bucket_boundaries() const { return boundaries_; }

 private:
  // Step 1-4 above: every rank's batches, before taking every W-th.
  std::vector<std::vector<size_t>> global_batches(int epoch) const;
  std::vector<std::vector<size_t>> dynamic_batches(const std::vector<size_t>& order) const;
  // Step 3's balancing of each step's batches.
  void balance_steps(std::vector<std::vector<size_t>>& batches, int epoch) const;

  std::vector<double> durations_;
  SamplerOptions options_;
  int rank_;
  int world_size_;
  std::vector<double> boundaries_;
};

}  // namespace mpiasr
