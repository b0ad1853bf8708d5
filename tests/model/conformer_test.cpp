// The whole Conformer-CTC model in fp64 on the CPU backend: its gradient
// against central finite differences, the invariances padding must keep
// (a padded batch equals its utterances one at a time; padded input frames
// change nothing), the per-layer gradient-ready callbacks, infeasible CTC
// utterances, the backward from a given gradient of the logits (the CTC
// loss's, and the output entropy's against finite differences), the batch checks, the blank
// statistics of a forward and the parts the parameters are grouped into.
#include "model/conformer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cpu/cpu_backend.h"
#include "kernels/cpu/ctc_loss.h"
#include "kernels/roofline_backend.h"
#include "model/output_entropy.h"
#include "tests/model/gradient_check.h"
#include "tests/model/random_batch.h"

namespace mpiasr {
namespace {

using testing::check_gradient;

constexpr int kVocab = 7;

ConformerConfig tiny_config(float dropout = 0.0f) {
  ConformerConfig config = conformer_preset("tiny");
  config.vocab_size = kVocab;
  config.dropout = dropout;
  return config;
}

HostBatch make_batch(const std::vector<int>& frames,
                     const std::vector<std::vector<int32_t>>& targets, int max_frames,
                     uint64_t seed) {
  return testing::random_batch(frames, targets, max_frames, seed, 100);
}

// Utterance b of `batch` alone, padded to its own length.
HostBatch single(const HostBatch& batch, int b) {
  const int L = batch.frame_lengths[size_t(b)];
  size_t start = 0;
  for (int i = 0; i < b; ++i) start += size_t(batch.target_lengths[size_t(i)]);
  std::vector<int32_t> targets(batch.targets.data() + start,
                               batch.targets.data() + start + batch.target_lengths[size_t(b)]);
  HostBatch one = make_batch({L}, {targets}, L, 0);
  const size_t row = size_t(batch.n_mels);
  std::copy(batch.features.data() + size_t(b) * batch.max_frames * row,
            batch.features.data() + (size_t(b) * batch.max_frames + size_t(L)) * row,
            one.features.data());
  return one;
}

// Frames 31, 25, 19 -> 7, 5, 4 output frames.
HostBatch standard_batch() {
  return make_batch({31, 25, 19}, {{1, 2, 3}, {4, 4}, {5, 6}}, 31, 42);
}

std::vector<double> grads_of(ParameterStore<double, double>& params) {
  return std::vector<double>(params.grad(), params.grad() + params.size());
}

void expect_close(const std::vector<double>& a, const std::vector<double>& b, double tolerance,
                  const std::string& what) {
  ASSERT_EQ(a.size(), b.size());
  double scale = 0.0;
  for (double v : a) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], tolerance * scale) << what << "[" << i << "]";
  }
}

class ConformerTest : public ::testing::Test {
 protected:
  CpuBackend<double> backend_{1};
};

void check_model_gradient(Conformer<double, double>& model, const HostBatch& batch, uint64_t seed,
                          int samples) {
  ParameterStore<double, double>& params = model.params();
  params.zero_grad();
  model.forward_backward(batch, 1.0, 1.0f, false, seed);
  const std::vector<double> grads = grads_of(params);
  auto loss = [&] {
    std::vector<double> losses = model.forward_backward(batch, 1.0, 1.0f, false, seed);
    return std::accumulate(losses.begin(), losses.end(), 0.0);
  };
  int tensor = 0;
  double worst = 0.0;
  for (const ParameterInfo& info : params.infos()) {
    worst = std::max(
        worst, check_gradient(info.name, grads.data() + info.offset, params.master() + info.offset,
                              info.count, loss, samples, uint64_t(++tensor)));
  }
  ::testing::Test::RecordProperty("worst_relative_error", std::to_string(worst));
}

TEST_F(ConformerTest, GradientMatchesFiniteDifferences) {
  Conformer<double, double> model(backend_, tiny_config(), 3, 31, 7);
  check_model_gradient(model, standard_batch(), 0, 2);
}

TEST_F(ConformerTest, GradientMatchesFiniteDifferencesWithDropout) {
  Conformer<double, double> model(backend_, tiny_config(0.1f), 3, 31, 7);
  check_model_gradient(model, standard_batch(), 12345, 0);
}

TEST_F(ConformerTest, PaddedBatchEqualsUtterancesOneAtATime) {
  Conformer<double, double> model(backend_, tiny_config(), 3, 31, 7);
  const HostBatch batch = standard_batch();
  model.params().zero_grad();
  const std::vector<double> losses = model.forward_backward(batch, 3.0, 2.0f, false, 0);
  const std::vector<double> batched = grads_of(model.params());

  model.params().zero_grad();
  for (int b = 0; b < batch.batch_size; ++b) {
    const std::vector<double> alone = model.forward_backward(single(batch, b), 3.0, 2.0f, false, 0);
    ASSERT_EQ(alone.size(), 1u);
    EXPECT_NEAR(alone[0], losses[size_t(b)], 1e-10 * losses[size_t(b)]) << "utterance " << b;
    EXPECT_GT(losses[size_t(b)], 0.0);
  }
  expect_close(batched, grads_of(model.params()), 1e-10, "gradient");

  std::vector<float> logprobs, one_logprobs;
  std::vector<int32_t> lengths, one_lengths;
  model.infer(batch, logprobs, lengths);
  const int T2 = model.output_frames(batch.max_frames);
  EXPECT_EQ(lengths, (std::vector<int32_t>{7, 5, 4}));
  for (int b = 0; b < batch.batch_size; ++b) {
    model.infer(single(batch, b), one_logprobs, one_lengths);
    ASSERT_EQ(one_lengths[0], lengths[size_t(b)]);
    for (size_t i = 0; i < size_t(lengths[size_t(b)]) * kVocab; ++i) {
      ASSERT_NEAR(one_logprobs[i], logprobs[size_t(b) * T2 * kVocab + i], 1e-6);
    }
  }
  // Every frame's log-probs are normalized.
  for (size_t row = 0; row < logprobs.size() / kVocab; ++row) {
    double sum = 0.0;
    for (int v = 0; v < kVocab; ++v) sum += std::exp(double(logprobs[row * kVocab + size_t(v)]));
    ASSERT_NEAR(sum, 1.0, 1e-5);
  }
}

TEST_F(ConformerTest, PaddedFramesChangeNothing) {
  Conformer<double, double> model(backend_, tiny_config(0.1f), 3, 31, 7);
  HostBatch batch = standard_batch();
  model.params().zero_grad();
  const std::vector<double> losses = model.forward_backward(batch, 7.0, 1.0f, false, 5);
  const std::vector<double> grads = grads_of(model.params());

  std::mt19937 rng(3);
  std::uniform_real_distribution<float> garbage(-50.0f, 50.0f);
  for (int b = 0; b < batch.batch_size; ++b) {
    for (int t = batch.frame_lengths[size_t(b)]; t < batch.max_frames; ++t) {
      for (int m = 0; m < batch.n_mels; ++m) {
        batch.features[(size_t(b) * batch.max_frames + size_t(t)) * 80 + size_t(m)] = garbage(rng);
      }
    }
  }
  model.params().zero_grad();
  const std::vector<double> garbage_losses = model.forward_backward(batch, 7.0, 1.0f, false, 5);
  for (size_t b = 0; b < losses.size(); ++b) EXPECT_NEAR(garbage_losses[b], losses[b], 1e-12);
  expect_close(grads, grads_of(model.params()), 1e-12, "gradient");
}

TEST_F(ConformerTest, GradientsReadyLayerByLayerInReverseOrder) {
  ConformerConfig config = tiny_config();
  Conformer<double, double> model(backend_, config, 3, 31, 7);
  ParameterStore<double, double>& params = model.params();
  params.zero_grad();
  struct Call {
    size_t offset, count;
    std::vector<double> grads;
  };
  std::vector<Call> calls;
  model.forward_backward(standard_batch(), 1.0, 1.0f, false, 0, [&](size_t offset, size_t count) {
    calls.push_back({offset, count, {params.grad() + offset, params.grad() + offset + count}});
  });
  // The head, each block, then the subsampling's out, conv.2 and conv.0.
  ASSERT_EQ(calls.size(), size_t(config.n_layers) + 4);
  // Reverse layer order, contiguous, covering the whole buffer.
  EXPECT_EQ(calls.front().offset + calls.front().count, params.size());
  EXPECT_EQ(calls.back().offset, 0u);
  for (size_t i = 1; i < calls.size(); ++i) {
    EXPECT_EQ(calls[i].offset + calls[i].count, calls[i - 1].offset) << "call " << i;
  }
  // What each call announced is final.
  for (const Call& call : calls) {
    for (size_t i = 0; i < call.count; ++i) {
      ASSERT_EQ(call.grads[i], params.grad()[call.offset + i]);
    }
  }
  EXPECT_EQ(params.info(params.index_of("ctc_head.weight")).offset, calls.front().offset);
  EXPECT_EQ(params.info(params.index_of("encoder.layers.1.ff1.norm.weight")).offset,
            calls[1].offset);
  const size_t subsampling = size_t(config.n_layers) + 1;
  EXPECT_EQ(params.info(params.index_of("encoder.subsampling.out.weight")).offset,
            calls[subsampling].offset);
  EXPECT_EQ(params.info(params.index_of("encoder.subsampling.conv.2.weight")).offset,
            calls[subsampling + 1].offset);
}

// backward_from_logits given the CTC loss's gradient of the logits (taken on
// the host from infer's log-probs) is the training step's backward.
TEST_F(ConformerTest, BackwardFromTheCtcGradientIsTheTrainingBackward) {
  Conformer<double, double> model(backend_, tiny_config(), 3, 31, 7);
  const HostBatch batch = standard_batch();
  model.params().zero_grad();
  model.forward_backward(batch, 1.0, 1.0f, false, 0);
  const std::vector<double> trained = grads_of(model.params());

  std::vector<double> logprobs;
  std::vector<int32_t> lengths;
  model.infer(batch, logprobs, lengths);
  const int T2 = model.output_frames(batch.max_frames);
  std::vector<double> losses(3), dlogits(logprobs.size()), unscaled(3, 1.0);
  cpu_ctc_loss<double>(losses.data(), dlogits.data(), logprobs.data(), batch.targets.data(),
                       batch.target_lengths.data(), lengths.data(), unscaled.data(), 3, T2, kVocab);
  model.params().zero_grad();
  model.backward_from_logits(dlogits.data());
  expect_close(trained, grads_of(model.params()), 1e-12, "gradient");
}

// The output entropy of one utterance (model/output_entropy.h) through
// backward_from_logits: its gradient in every tensor against central
// differences.
TEST_F(ConformerTest, OutputEntropyGradientMatchesFiniteDifferences) {
  Conformer<double, double> model(backend_, tiny_config(), 1, 31, 7);
  const HostBatch batch = make_batch({31}, {{1, 2, 3}}, 31, 5);
  std::vector<double> logprobs;
  std::vector<int32_t> lengths;
  auto entropy = [&](double* dlogits) {
    model.infer(batch, logprobs, lengths);
    return output_entropy(logprobs.data(), lengths[0], kVocab, 2.0, dlogits).value;
  };
  std::vector<double> dlogits(size_t(model.output_frames(31)) * kVocab);
  entropy(dlogits.data());
  ParameterStore<double, double>& params = model.params();
  params.zero_grad();
  model.backward_from_logits(dlogits.data());
  const std::vector<double> grads = grads_of(params);
  int tensor = 0;
  for (const ParameterInfo& info : params.infos()) {
    check_gradient(
        info.name, grads.data() + info.offset, params.master() + info.offset, info.count,
        [&] { return entropy(nullptr); }, 2, uint64_t(++tensor));
  }
}

TEST_F(ConformerTest, InfeasibleUtterances) {
  Conformer<double, double> model(backend_, tiny_config(), 3, 31, 7);
  // The third utterance has 4 output frames for 5 5 5, which needs 3 tokens + 2
  // blanks between the repeats = 5 frames: infeasible.
  HostBatch batch = make_batch({31, 25, 19}, {{1, 2, 3}, {4, 4}, {5, 5, 5}}, 31, 42);
  try {
    model.forward_backward(batch, 1.0, 1.0f, false, 0);
    FAIL() << "an infeasible utterance did not stop the step";
  } catch (const Error& error) {
    EXPECT_EQ(error.code(), ExitCode::kBadInput);
    EXPECT_NE(std::string(error.what()).find("manifest entry 102"), std::string::npos)
        << error.what();
  }
  // zero_infinity: loss 0 and no gradient from it; the others as if alone.
  model.params().zero_grad();
  const std::vector<double> losses = model.forward_backward(batch, 1.0, 1.0f, true, 0);
  EXPECT_EQ(losses[2], 0.0);
  const std::vector<double> grads = grads_of(model.params());
  model.params().zero_grad();
  for (int b = 0; b < 2; ++b) model.forward_backward(single(batch, b), 1.0, 1.0f, false, 0);
  expect_close(grads, grads_of(model.params()), 1e-10, "gradient");
}

TEST_F(ConformerTest, RejectsBatchesItCannotRun) {
  Conformer<double, double> model(backend_, tiny_config(), 3, 31, 7);
  HostBatch bad_token = make_batch({31}, {{1, kVocab}}, 31, 1);
  EXPECT_THROW(model.forward_backward(bad_token, 1.0, 1.0f, false, 0), Error);
  HostBatch too_long = make_batch({32}, {{1}}, 32, 1);
  EXPECT_THROW(model.forward_backward(too_long, 1.0, 1.0f, false, 0), Error);
  HostBatch too_many = make_batch({9, 9, 9, 9}, {{1}, {1}, {1}, {1}}, 9, 1);
  EXPECT_THROW(model.forward_backward(too_many, 1.0, 1.0f, false, 0), Error);
  HostBatch wrong_mels = make_batch({31}, {{1}}, 31, 1);
  wrong_mels.n_mels = 40;
  EXPECT_THROW(model.forward_backward(wrong_mels, 1.0, 1.0f, false, 0), Error);
  try {
    model.forward_backward(bad_token, 1.0, 1.0f, false, 0);
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("target token 7 at position 1"), std::string::npos)
        << error.what();
  }
}

// conv.0's output gradient (B x T1 x F1 x C) is planned in the activation
// memory only for a backend that forms it whole: the CPU computes it strip
// by strip inside subsampling_first_conv_backward.
TEST_F(ConformerTest, PlansConv0OutputGradientOnlyWhereTheBackendStoresIt) {
  const ConformerConfig config = tiny_config();
  const BatchShapes shapes({{3, 61}});
  RooflineBackend<double, double> stores_da1(1e12, 1e12);
  ASSERT_FALSE(backend_.subsampling_da1_scratch());
  ASSERT_TRUE(stores_da1.subsampling_da1_scratch());
  Conformer<double, double> cpu(backend_, config, shapes, 7);
  Conformer<double, double> whole(stores_da1, config, shapes, 7);
  const size_t F1 = size_t(config.n_mels - 1) / 2;
  const size_t da1_bytes = shapes.conv1_rows() * F1 * config.subsampling_channels * sizeof(double);
  EXPECT_EQ(whole.arena_bytes() - cpu.arena_bytes(), (da1_bytes + 255) / 256 * 256);
}

// A model planned for the shapes it will see (many short utterances, or one
// long one) holds a fraction of the arena of one planned for the largest B
// times the largest T, and computes the same: the same log-probs and
// gradients, bit for bit, for a batch of each shape. A batch outside the
// plan (many long utterances) is refused.
TEST_F(ConformerTest, PlannedForTheBatchShapesItWillSee) {
  const BatchShapes shapes({{6, 60}, {1, 300}});
  // T2(60) = 14, T2(300) = 74: rows max(6 x 14, 74) = 84, not 6 x 74 = 444.
  EXPECT_EQ(shapes.rows(), 84u);
  EXPECT_EQ(shapes.input_rows(), 360u);
  Conformer<double, double> planned(backend_, tiny_config(), shapes, 7);
  Conformer<double, double> largest(backend_, tiny_config(), 6, 300, 7);
  EXPECT_LT(planned.arena_bytes() * 4, largest.arena_bytes());

  const HostBatch many_short =
      make_batch({60, 55, 50, 45, 40, 35}, {{1, 2}, {3}, {4, 5}, {6}, {1}, {2, 3}}, 60, 3);
  const HostBatch one_long = make_batch({300}, {{1, 2, 3, 4, 5, 6}}, 300, 4);
  for (const HostBatch* batch : {&many_short, &one_long}) {
    std::vector<float> logprobs_planned, logprobs_largest;
    std::vector<int32_t> lengths;
    planned.infer(*batch, logprobs_planned, lengths);
    largest.infer(*batch, logprobs_largest, lengths);
    EXPECT_EQ(logprobs_planned, logprobs_largest);
    planned.params().zero_grad();
    largest.params().zero_grad();
    EXPECT_EQ(planned.forward_backward(*batch, 1.0, 1.0f, true, 5),
              largest.forward_backward(*batch, 1.0, 1.0f, true, 5));
    EXPECT_EQ(grads_of(planned.params()), grads_of(largest.params()));
  }
  const HostBatch two_long = make_batch({300, 290}, {{1}, {2}}, 300, 5);
  try {
    std::vector<float> logprobs;
    std::vector<int32_t> lengths;
    planned.infer(two_long, logprobs, lengths);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("batch of 2 x 300 frames does not fit the model's plan"),
              std::string::npos)
        << e.what();
  }
}

TEST(BlankStatisticsTest, CountOnlyTheUtterancesFrames) {
  // Two utterances of 2 and 1 output frames, padded to 3, vocabulary 3; each
  // row is a frame's probabilities, the blank's first.
  const std::vector<std::vector<double>> probs = {
      // utterance 0: the blank wins, loses, then a padding frame
      {0.5, 0.3, 0.2},
      {0.2, 0.4, 0.4},
      {0.9, 0.05, 0.05},
      // utterance 1: a tie, then two padding frames
      {1. / 3, 1. / 3, 1. / 3},
      {0.9, 0.05, 0.05},
      {0.9, 0.05, 0.05},
  };
  std::vector<float> logprobs;
  for (const std::vector<double>& row : probs) {
    for (double p : row) logprobs.push_back(float(std::log(p)));
  }
  const std::vector<int32_t> lengths = {2, 1};
  BlankStatistics stats;
  add_blank_statistics(stats, logprobs.data(), lengths.data(), 2, 3, 3);
  EXPECT_EQ(stats.frames, 3);
  EXPECT_NEAR(stats.posterior, 0.5 + 0.2 + 1. / 3, 1e-6);
  EXPECT_EQ(stats.argmax, 2);  // the first frame and the tie
  add_blank_statistics(stats, logprobs.data(), lengths.data(), 2, 3, 3);
  EXPECT_EQ(stats.frames, 6);  // added to what was there
}

TEST_F(ConformerTest, BlankStatisticsAreThoseOfTheLastForward) {
  Conformer<double, double> model(backend_, tiny_config(), 3, 31, 7);
  const HostBatch batch = standard_batch();
  std::vector<float> logprobs;
  std::vector<int32_t> lengths;
  model.infer(batch, logprobs, lengths);
  double frames = 0, posterior = 0, argmax = 0;
  const int T2 = int(logprobs.size()) / (batch.batch_size * kVocab);
  for (int b = 0; b < batch.batch_size; ++b) {
    for (int t = 0; t < lengths[size_t(b)]; ++t) {
      const float* row = logprobs.data() + (size_t(b) * T2 + size_t(t)) * kVocab;
      frames += 1;
      posterior += std::exp(double(row[0]));
      bool blank_wins = true;
      for (int v = 1; v < kVocab; ++v) blank_wins = blank_wins && row[v] <= row[0];
      argmax += blank_wins;
    }
  }
  EXPECT_EQ(frames, 7 + 5 + 4);
  BlankStatistics stats;
  model.add_blank_statistics(stats);
  EXPECT_EQ(stats.frames, frames);
  EXPECT_NEAR(stats.posterior, posterior, 1e-6);
  EXPECT_EQ(stats.argmax, argmax);
  // After training's forward too: the same batch, no dropout, the same output.
  model.forward_backward(batch, 1.0, 1.0f, false, 0);
  BlankStatistics trained;
  model.add_blank_statistics(trained);
  EXPECT_EQ(trained.frames, frames);
  EXPECT_NEAR(trained.posterior, posterior, 1e-6);
}

TEST_F(ConformerTest, ParameterGroupsTileTheParametersByPart) {
  const ConformerConfig config = tiny_config();
  Conformer<double, double> model(backend_, config, 3, 31, 7);
  const std::vector<ParameterGroup> groups = model.parameter_groups();
  ASSERT_EQ(groups.size(), size_t(config.n_layers) + 2);
  EXPECT_EQ(groups.front().name, "encoder.subsampling");
  EXPECT_EQ(groups[1].name, "encoder.layers.0");
  EXPECT_EQ(groups.back().name, "ctc_head");
  EXPECT_EQ(groups.front().first, 0);
  EXPECT_EQ(size_t(groups.back().last), model.params().infos().size());
  for (size_t g = 0; g < groups.size(); ++g) {
    if (g > 0) {
      EXPECT_EQ(groups[g].first, groups[g - 1].last) << groups[g].name;
    }
    EXPECT_LT(groups[g].first, groups[g].last) << groups[g].name;
    for (int p = groups[g].first; p < groups[g].last; ++p) {
      EXPECT_EQ(model.params().info(p).name.rfind(groups[g].name + ".", 0), 0u)
          << model.params().info(p).name << " in " << groups[g].name;
    }
  }
}

}  // namespace
}  // namespace mpiasr
