// Sampler invariants for world sizes 1-8: equal batch counts on every rank,
// every utterance once per epoch (plus the documented padding), drop_last,
// determinism per seed and epoch, the padded budget and the utterance cap,
// balanced steps, resuming, and the errors for bad input.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "io/sampler.h"
#include "src/base/error.h"

namespace mpiasr {
namespace {

using Batches = std::vector<std::vector<size_t>>;

// Durations in [1, 16) s from a fixed linear congruential sequence.
std::vector<double> make_durations(size_t count) {
  std::vector<double> durations;
  uint64_t state = 12345;
  for (size_t i = 0; i < count; ++i) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    durations.push_back(1.0 + 15.0 * static_cast<double>(state >> 11) / 9007199254740992.0);
  }
  return durations;
}

// Every rank's batches of the epoch, rank by rank.
std::vector<Batches> all_ranks(const std::vector<double>& durations, const SamplerOptions& options,
                               int world_size, int epoch) {
  std::vector<Batches> ranks;
  for (int rank = 0; rank < world_size; ++rank) {
    ranks.push_back(Sampler(durations, options, rank, world_size).epoch_batches(epoch));
  }
  return ranks;
}

// The global list back in order: batch b is rank b % W's batch b / W.
Batches interleave(const std::vector<Batches>& ranks) {
  Batches global;
  for (size_t i = 0; i < ranks[0].size(); ++i) {
    for (const Batches& rank : ranks) global.push_back(rank[i]);
  }
  return global;
}

struct Case {
  std::string mode;
  int world_size;
};

class ShardingTest : public testing::TestWithParam<Case> {};

TEST_P(ShardingTest, EqualCountsAndEveryUtteranceOncePlusPadding) {
  auto durations = make_durations(503);
  SamplerOptions options;
  options.mode = GetParam().mode;
  options.max_batch_seconds = 60;
  options.max_batch_utterances = 16;
  options.batch_size = 7;
  options.seed = 42;
  int world = GetParam().world_size;
  for (int epoch = 0; epoch < 3; ++epoch) {
    std::vector<Batches> padded_ranks = all_ranks(durations, options, world, epoch);
    options.drop_last = true;
    std::vector<Batches> trimmed_ranks = all_ranks(durations, options, world, epoch);
    options.drop_last = false;
    for (int rank = 1; rank < world; ++rank) {
      EXPECT_EQ(padded_ranks[rank].size(), padded_ranks[0].size());
      EXPECT_EQ(trimmed_ranks[rank].size(), trimmed_ranks[0].size());
    }
    EXPECT_EQ(Sampler(durations, options, world - 1, world).batches_per_epoch(epoch),
              padded_ranks[0].size());

    // Padded: the list is n distinct batches, then W - n % W copies, each of
    // the batch W places before it (its rank's batch before).
    Batches padded = interleave(padded_ranks);
    EXPECT_EQ(padded.size() % world, 0u);
    std::map<size_t, int> seen;
    for (const auto& batch : padded) {
      for (size_t i : batch) ++seen[i];
    }
    size_t distinct = padded.size();
    for (size_t k = 0; k < padded.size(); ++k) {
      if (std::count(padded.begin(), padded.begin() + k, padded[k]) > 0) --distinct;
    }
    size_t repeats = padded.size() - distinct;
    EXPECT_LT(repeats, static_cast<size_t>(world));
    EXPECT_EQ(repeats, (world - distinct % world) % world);
    std::set<size_t> repeated_utterances;
    for (size_t k = distinct; k < padded.size(); ++k) {
      EXPECT_EQ(padded[k], padded[k - world]);
      repeated_utterances.insert(padded[k].begin(), padded[k].end());
    }
    ASSERT_EQ(seen.size(), durations.size());  // every utterance at least once
    for (const auto& [utterance, count] : seen) {
      EXPECT_EQ(count, repeated_utterances.count(utterance) ? 2 : 1) << "utterance " << utterance;
    }

    // Trimmed: the first n - n % W batches of the same list, each utterance at most once.
    Batches trimmed = interleave(trimmed_ranks);
    EXPECT_EQ(trimmed.size(), distinct - distinct % world);
    EXPECT_TRUE(std::equal(trimmed.begin(), trimmed.end(), padded.begin()));
    std::set<size_t> once;
    for (const auto& batch : trimmed) {
      for (size_t i : batch) EXPECT_TRUE(once.insert(i).second) << "utterance " << i << " twice";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(WorldSizes, ShardingTest,
                         testing::Values(Case{"dynamic", 1}, Case{"dynamic", 2}, Case{"dynamic", 3},
                                         Case{"dynamic", 4}, Case{"dynamic", 5}, Case{"dynamic", 6},
                                         Case{"dynamic", 7}, Case{"dynamic", 8}, Case{"fixed", 1},
                                         Case{"fixed", 3}, Case{"fixed", 8}),
                         [](const auto& info) {
                           return info.param.mode + "_world" +
                                  std::to_string(info.param.world_size);
                         });

TEST(Sampler, DynamicBatchesRespectPaddedBudgetAndCap) {
  auto durations = make_durations(2000);
  SamplerOptions options;
  options.max_batch_seconds = 90;
  options.max_batch_utterances = 12;
  Sampler sampler(durations, options, 0, 1);
  double audio = 0, padded = 0;
  bool cap_reached = false;
  for (const auto& batch : sampler.epoch_batches(0)) {
    double longest = 0;
    for (size_t i : batch) {
      longest = std::max(longest, durations[i]);
      audio += durations[i];
    }
    EXPECT_LE(batch.size() * longest, options.max_batch_seconds);
    EXPECT_LE(batch.size(), 12u);
    cap_reached |= batch.size() == 12u;
    padded += batch.size() * longest;
  }
  EXPECT_TRUE(cap_reached);  // short utterances hit the cap, not the budget
  // Buckets keep padding small: over 90% of the padded batch is audio.
  EXPECT_GT(audio / padded, 0.9);
}

TEST(Sampler, BucketsFromQuantilesOrGiven) {
  std::vector<double> durations;
  for (int i = 1; i <= 100; ++i) durations.push_back(i);
  SamplerOptions options;
  options.max_batch_seconds = 1000;
  options.num_buckets = 4;
  EXPECT_EQ(Sampler(durations, options, 0, 1).bucket_boundaries(),
            (std::vector<double>{26, 51, 76}));

  options.bucket_boundaries = {10.5, 50.5};
  Sampler sampler(durations, options, 0, 1);
  for (const auto& batch : sampler.epoch_batches(0)) {
    auto bucket = [](double d) { return d < 10.5 ? 0 : d < 50.5 ? 1 : 2; };
    for (size_t i : batch) EXPECT_EQ(bucket(durations[i]), bucket(durations[batch[0]]));
  }
}

TEST(Sampler, FixedBatchesHaveBatchSize) {
  auto durations = make_durations(100);
  SamplerOptions options;
  options.mode = "fixed";
  options.batch_size = 8;
  Batches batches = Sampler(durations, options, 0, 1).epoch_batches(0);
  ASSERT_EQ(batches.size(), 13u);
  int smaller = 0;
  for (const auto& batch : batches) smaller += batch.size() != 8u;
  EXPECT_EQ(smaller, 1);  // 100 = 12 * 8 + 4
}

TEST(Sampler, DeterministicPerSeedDifferentPerEpoch) {
  auto durations = make_durations(300);
  SamplerOptions options;
  options.max_batch_seconds = 50;
  options.seed = 7;
  Sampler a(durations, options, 1, 3);
  Sampler b(durations, options, 1, 3);
  EXPECT_EQ(a.epoch_batches(5), b.epoch_batches(5));
  EXPECT_NE(a.epoch_batches(5), a.epoch_batches(6));
  options.seed = 8;
  EXPECT_NE(Sampler(durations, options, 1, 3).epoch_batches(5), a.epoch_batches(5));
  // The rank decides which batches, not how they are formed.
  EXPECT_NE(Sampler(durations, options, 0, 3).epoch_batches(5),
            Sampler(durations, options, 1, 3).epoch_batches(5));
}

TEST(Sampler, ResumedPositionGivesTheSameRemainingBatches) {
  auto durations = make_durations(400);
  SamplerOptions options;
  options.max_batch_seconds = 40;
  options.seed = 3;
  Batches before_restart = Sampler(durations, options, 2, 4).epoch_batches(9);
  size_t position = before_restart.size() / 2;
  Batches after_restart = Sampler(durations, options, 2, 4).epoch_batches(9);
  ASSERT_EQ(after_restart.size(), before_restart.size());
  EXPECT_TRUE(std::equal(after_restart.begin() + position, after_restart.end(),
                         before_restart.begin() + position));
}

// Padded seconds of a batch: utterances x the longest.
double cost(const std::vector<size_t>& batch, const std::vector<double>& durations) {
  double longest = 0;
  for (size_t i : batch) longest = std::max(longest, durations[i]);
  return double(batch.size()) * longest;
}

// Brute force over every step of `batches` (steps of `step` batches, the last
// one possibly fewer): within its window (16 steps; the last window takes the
// rest of the list), no batch outside a step costs strictly between that
// step's cheapest and dearest batch.
void check_adjacent_costs(const Batches& batches, const std::vector<double>& durations, size_t step,
                          const std::string& label) {
  const size_t window = 16 * step;
  for (size_t begin = 0, end = 0; begin < batches.size(); begin = end) {
    end = batches.size() - begin < 2 * window ? batches.size() : begin + window;
    for (size_t first = begin; first < end; first += step) {
      const size_t last = std::min(first + step, end);
      double low = 1e300, high = 0;
      for (size_t k = first; k < last; ++k) {
        low = std::min(low, cost(batches[k], durations));
        high = std::max(high, cost(batches[k], durations));
      }
      for (size_t k = begin; k < end; ++k) {
        if (k >= first && k < last) continue;
        const double c = cost(batches[k], durations);
        EXPECT_FALSE(c > low && c < high)
            << label << ": batch " << k << " costs " << c << ", inside step " << first / step
            << "'s " << low << ".." << high;
      }
    }
  }
}

// The sum over steps of each step's cost spread.
double cost_spread(const Batches& batches, const std::vector<double>& durations, size_t step) {
  double spread = 0;
  for (size_t first = 0; first < batches.size(); first += step) {
    double low = 1e300, high = 0;
    for (size_t k = first; k < std::min(first + step, batches.size()); ++k) {
      low = std::min(low, cost(batches[k], durations));
      high = std::max(high, cost(batches[k], durations));
    }
    spread += high - low;
  }
  return spread;
}

TEST(Sampler, BalancedStepsTakeAdjacentCostsOfTheirWindow) {
  // 503 utterances make 100-odd dynamic and 72 fixed batches: windows of 16
  // steps leave a remainder, and some world sizes need padding or trimming.
  auto durations = make_durations(503);
  struct Split {
    int world, accumulation;
  };
  for (std::string mode : {"dynamic", "fixed"}) {
    for (Split split : {Split{1, 4}, Split{2, 1}, Split{2, 3}, Split{3, 2}, Split{5, 1}}) {
      for (bool drop_last : {false, true}) {
        SamplerOptions plain;
        plain.mode = mode;
        plain.max_batch_seconds = 60;
        plain.max_batch_utterances = 16;
        plain.batch_size = 7;
        plain.seed = 42;
        plain.drop_last = drop_last;
        SamplerOptions balanced = plain;
        balanced.step_batches = split.world * split.accumulation;
        const size_t step = size_t(balanced.step_batches);
        const std::string label = mode + ", " + std::to_string(split.world) + " ranks x " +
                                  std::to_string(split.accumulation) +
                                  (drop_last ? ", drop_last" : ", padded");
        const Batches unbalanced = interleave(all_ranks(durations, plain, split.world, 3));
        const Batches batches = interleave(all_ranks(durations, balanced, split.world, 3));

        // The same batches, reordered (trimmed, as many of them); padded, the
        // copies are of the batch one step of ranks before.
        std::set<std::vector<size_t>> a(unbalanced.begin(), unbalanced.end());
        std::set<std::vector<size_t>> b(batches.begin(), batches.end());
        ASSERT_EQ(batches.size(), unbalanced.size()) << label;
        if (drop_last) {
          SamplerOptions every_batch = plain;
          every_batch.drop_last = false;
          const Batches all = interleave(all_ranks(durations, every_batch, split.world, 3));
          ASSERT_EQ(b.size(), batches.size()) << label;
          for (const auto& batch : batches) {
            ASSERT_NE(std::find(all.begin(), all.end(), batch), all.end()) << label;
          }
        } else {
          ASSERT_EQ(a, b) << label;
        }
        for (size_t k = b.size(); k < batches.size(); ++k) {
          EXPECT_EQ(batches[k], batches[k - size_t(split.world)]) << label << ": copy " << k;
        }

        // The balancing itself is on the distinct batches; the copies
        // after them come from the step before.
        const Batches distinct(batches.begin(), batches.begin() + std::ptrdiff_t(b.size()));
        check_adjacent_costs(distinct, durations, step, label);
        const double spread = cost_spread(batches, durations, step);
        // And so steps are far more even than a plain shuffle's.
        EXPECT_LT(spread, cost_spread(unbalanced, durations, step) / 4) << label;
      }
    }
  }
}

TEST(Sampler, BalancedStepsAreTheSameForAnySplitIntoRanksAndAccumulation) {
  auto durations = make_durations(503);
  SamplerOptions options;
  options.max_batch_seconds = 60;
  options.max_batch_utterances = 16;
  options.seed = 7;
  options.step_batches = 4;
  const Batches one_rank = Sampler(durations, options, 0, 1).epoch_batches(1);
  for (int world : {2, 4}) {
    const Batches global = interleave(all_ranks(durations, options, world, 1));
    ASSERT_GE(global.size(), one_rank.size());
    EXPECT_TRUE(std::equal(one_rank.begin(), one_rank.end(), global.begin())) << world << " ranks";
  }
  options.step_batches = 0;
  EXPECT_THROW(Sampler(durations, options, 0, 1), Error);
}

TEST(Sampler, ShortestFirstEpochsGoInOrderOfTheLongestUtterance) {
  // SortaGrad: in the first shortest_first_epochs epochs the global batch
  // list is the shuffled epoch's batches sorted by their longest utterance,
  // for any world size; later epochs are as without the option.
  auto durations = make_durations(503);
  const auto longest = [&](const std::vector<size_t>& batch) {
    double value = 0;
    for (size_t i : batch) value = std::max(value, durations[i]);
    return value;
  };
  for (std::string mode : {"dynamic", "fixed"}) {
    for (int world : {1, 2, 3}) {
      SamplerOptions plain;
      plain.mode = mode;
      plain.max_batch_seconds = 60;
      plain.max_batch_utterances = 16;
      plain.batch_size = 7;
      plain.seed = 5;
      plain.step_batches = world;
      SamplerOptions sorted = plain;
      sorted.shortest_first_epochs = 2;
      const std::string label = mode + ", " + std::to_string(world) + " ranks";
      for (int epoch : {0, 1}) {
        const Batches batches = interleave(all_ranks(durations, sorted, world, epoch));
        const Batches shuffled = interleave(all_ranks(durations, plain, world, epoch));
        // The same batches (and padding copies), in a new order.
        EXPECT_EQ(batches.size(), shuffled.size()) << label;
        std::set<std::vector<size_t>> a(batches.begin(), batches.end());
        std::set<std::vector<size_t>> b(shuffled.begin(), shuffled.end());
        EXPECT_EQ(a, b) << label << ", epoch " << epoch;
        // Sorted, up to the padding copies at the end.
        for (size_t k = 1; k < a.size(); ++k) {
          EXPECT_LE(longest(batches[k - 1]), longest(batches[k]))
              << label << ", epoch " << epoch << ", batch " << k;
        }
      }
      EXPECT_EQ(interleave(all_ranks(durations, sorted, world, 2)),
                interleave(all_ranks(durations, plain, world, 2)))
          << label << ": epoch 2 is shuffled again";
    }
  }
  SamplerOptions negative;
  negative.shortest_first_epochs = -1;
  EXPECT_THROW(Sampler(durations, negative, 0, 1), Error);
}

TEST(Sampler, UtteranceLongerThanTheBudgetIsNamed) {
  std::vector<double> durations = {1, 2, 3, 4, 5, 31.5, 2};
  SamplerOptions options;
  options.max_batch_seconds = 30;
  try {
    Sampler sampler(durations, options, 0, 1);
    ADD_FAILURE() << "accepted an utterance longer than the budget";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::kBadInput);
    EXPECT_THAT(error.what(), testing::HasSubstr("utterance 5 is 31.5 s long"));
  }
  options.mode = "fixed";  // fixed batches have no seconds budget
  EXPECT_NO_THROW(Sampler(durations, options, 0, 1));
}

TEST(Sampler, RejectsBadArguments) {
  auto durations = make_durations(10);
  EXPECT_THROW(Sampler(durations, SamplerOptions{}, 2, 2), Error);
  EXPECT_THROW(Sampler({1.0, -1.0}, SamplerOptions{}, 0, 1), Error);
  EXPECT_THROW(Sampler({}, SamplerOptions{}, 0, 1), Error);
  SamplerOptions bad_mode;
  bad_mode.mode = "sorted";
  EXPECT_THROW(Sampler(durations, bad_mode, 0, 1), Error);
  SamplerOptions bad_buckets;
  bad_buckets.bucket_boundaries = {5, 3};
  EXPECT_THROW(Sampler(durations, bad_buckets, 0, 1), Error);
  SamplerOptions few_batches;
  few_batches.mode = "fixed";
  few_batches.batch_size = 4;
  few_batches.drop_last = true;  // 3 batches for 4 ranks
  EXPECT_THROW(Sampler(durations, few_batches, 0, 4).epoch_batches(0), Error);
  few_batches.drop_last = false;  // padded: batches repeat cyclically
  EXPECT_EQ(Sampler(durations, few_batches, 3, 4).epoch_batches(0),
            Sampler(durations, few_batches, 0, 4).epoch_batches(0));
}

}  // namespace
}  // namespace mpiasr
