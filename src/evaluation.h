// Evaluation of a model on a manifest: validation during training, `mpiasr
// eval` and `mpiasr transcribe` all run this.
//
// Batches: the utterances sorted by duration (longest first, ties by index),
// rank r of W taking utterances r, r + W, ... of that order, each rank's share
// cut greedily into batches under the training budget (dynamic: B x longest
// <= batching.max_batch_seconds and B <= batching.max_batch_utterances;
// fixed: B <= batching.batch_size); an utterance longer than the decode window
// (src/batch_plan.h) is alone in its batch and decoded in windows. Sorting
// keeps padding small; nothing is repeated or dropped, so sums over ranks
// count every utterance once.
//
// Per batch: log-probs from Conformer::infer, greedy CTC decoding or the
// beam search given (white space runs in the text collapsed, ends trimmed),
// the CTC loss of each utterance (cpu_ctc_loss on the host log-probs; utterances too
// short for their transcript are left out of the loss and counted as
// infeasible), and CER/WER against the manifest transcript. An utterance too
// short to give an output frame decodes to an empty hypothesis (a batch of
// only such utterances never reaches the model).
//
// Totals are plain sums, so ranks add them (allreduce_totals) and divide once.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "io/fbank.h"
#include "io/feature_stream.h"
#include "io/loader.h"
#include "io/manifest.h"
#include "io/text_normalize.h"
#include "io/tokenizer.h"
#include "kernels/cpu/ctc_loss.h"
#include "model/conformer.h"
#include "model/ctc_beam_search.h"
#include "model/ctc_decode.h"
#include "model/error_rate.h"
#include "mpi/context.h"
#include "src/batch_plan.h"
#include "src/chunked_decoding.h"
#include "src/config.h"
#include "src/feature_pipeline.h"
#include "src/test_time_adaptation.h"

namespace mpiasr {

// An utterance longer than alone_seconds (the decode window) gets a batch of
// its own, decoded in windows.
std::vector<std::vector<size_t>> evaluation_batches(const std::vector<double>& durations,
                                                    const BatchingConfig& batching, int rank,
                                                    int world_size, double alone_seconds);

struct EvaluationTotals {
  double loss = 0;    // sum of utterance CTC losses (feasible utterances)
  double tokens = 0;  // target tokens of those utterances
  double infeasible = 0;
  double utterances = 0;
  double audio_seconds = 0;
  ErrorCounts errors;

  double loss_per_token() const { return tokens > 0 ? loss / tokens : 0.0; }
};

// "" when the log-probs rows [frames, V] (output frames first_frame, ...)
// are all finite, else what is wrong, naming the first value that is not.
std::string non_finite_logprobs(const float* rows, size_t frames, int V, int first_frame);

// Throws Error(kNonFinite) naming the first utterance of `batch` whose
// log-probabilities ([B, T2, V], lengths[b] frames valid) are not all finite:
// the weights are broken (a model that diverged), and the decoding would
// be nothing with a loss of 0.
void check_finite_logprobs(const std::vector<float>& logprobs, const std::vector<int32_t>& lengths,
                           int T2, int V, const Batch& batch, const Manifest& manifest);

// Sums the totals over every rank. Collective.
void allreduce_totals(const mpi::Context& ctx, EvaluationTotals& totals);

struct Hypothesis {
  size_t utterance = 0;  // index into the manifest
  std::string text;
  ErrorCounts errors;    // of this utterance alone
  bool feasible = true;  // false: shorter than its transcript allows, left out of the loss
};

// Called after each batch with the utterances done so far on this rank.
using EvaluationProgress = std::function<void(size_t utterances_done)>;
// Called with each batch, its log-probs [B, T2, V] and output lengths [B].
using BatchOutputs = std::function<void(const Batch& batch, const std::vector<float>& logprobs,
                                        const std::vector<int32_t>& output_lengths)>;

// Decodes `batches` of `manifest` with `model`, greedily or with
// `beam_search` when not null; loader must be built over the same manifest
// and tokenizer. An utterance longer than windowing.seconds (alone in its
// batch) is decoded in windows (src/chunked_decoding.h) from features
// streamed as its windows need them (io/feature_stream.h), its greedy
// decoding and loss taken as its log-probs come (the beam search keeps its
// log-probs whole); with `outputs`, which sees whole batches, it goes
// through the loader whole. Appends each utterance's hypothesis to
// `hypotheses` when not null. With `adaptation` (batches of one utterance),
// each utterance's log-probs come from the weights adapted to it
// (src/test_time_adaptation.h); one decoded in windows is not adapted.
template <typename Act, typename Acc>
EvaluationTotals evaluate(Conformer<Act, Acc>& model, Loader& loader,
                          std::vector<std::vector<size_t>> batches, const Manifest& manifest,
                          const Tokenizer& tokenizer, const DecodeWindowing& windowing,
                          std::vector<Hypothesis>* hypotheses,
                          const EvaluationProgress& progress = {},
                          const CtcBeamSearch* beam_search = nullptr,
                          const BatchOutputs& outputs = {},
                          TestTimeAdaptation<Act, Acc>* adaptation = nullptr) {
  EvaluationTotals totals;
  const int V = model.config().vocab_size;
  const TextNormalizeOptions kCollapseSpaces{false, false, true, true};
  auto record = [&](size_t utterance, const std::vector<int32_t>& tokens, double loss,
                    int target_length) {
    Hypothesis hypothesis;
    hypothesis.utterance = utterance;
    hypothesis.feasible = std::isfinite(loss);
    if (hypothesis.feasible) {
      totals.loss += loss;
      totals.tokens += target_length;
    } else {
      totals.infeasible += 1;
    }
    hypothesis.text = normalize_text(
        tokenizer.decode(std::vector<int>(tokens.begin(), tokens.end())), kCollapseSpaces);
    hypothesis.errors.add(manifest.utterances[utterance].transcript, hypothesis.text);
    totals.errors.merge(hypothesis.errors);
    if (hypotheses) hypotheses->push_back(std::move(hypothesis));
  };

  // Utterances over the window come first (the batches are longest first).
  size_t streamed = 0;
  for (; !outputs && streamed < batches.size(); ++streamed) {
    const size_t utterance = batches[streamed][0];
    if (batches[streamed].size() > 1 ||
        manifest.utterances[utterance].duration <= windowing.seconds) {
      break;
    }
    const std::vector<int32_t>& target = loader.tokens(utterance);
    std::vector<int32_t> tokens;
    double loss = 0;
    loader.stream_features(utterance, [&](FeatureStream& stream) {
      const int T2 = subsampled_frames(stream.frames());
      CtcForwardLoss forward(target, T2);
      CtcGreedyStream greedy;
      std::vector<float> logprobs;  // whole, for the beam search
      decode_in_windows(
          model, stream.frames(), loader.fbank().options().n_mels, windowing, utterance,
          [&](int first, int end) { return stream.features(first, end); },
          [&](const float* rows, int first, int count) {
            const std::string bad = non_finite_logprobs(rows, count, V, first);
            if (!bad.empty()) throw Error(ExitCode::kNonFinite, bad);
            forward.push(rows, count, V);
            if (beam_search) {
              logprobs.insert(logprobs.end(), rows, rows + size_t(count) * size_t(V));
            } else {
              greedy.push(rows, count, V);
            }
          });
      loss = forward.loss();
      tokens = beam_search ? beam_search->decode(logprobs.data(), T2).tokens : greedy.tokens();
      totals.audio_seconds += double(stream.samples()) / loader.fbank().options().sample_rate;
    });
    record(utterance, tokens, loss, int(target.size()));
    totals.utterances += 1;
    if (progress) progress(size_t(totals.utterances));
  }
  batches.erase(batches.begin(), batches.begin() + ptrdiff_t(streamed));

  loader.start_epoch(0, std::move(batches));
  Batch batch;
  std::vector<float> logprobs;
  std::vector<int32_t> lengths;
  std::vector<double> losses;
  while (loader.next(batch)) {
    const int B = batch.batch_size, T2 = model.output_frames(batch.max_frames);
    losses.assign(size_t(B), std::numeric_limits<double>::infinity());
    std::vector<std::vector<int32_t>> decoded(static_cast<size_t>(B));
    const size_t first = batch.utterance_indices[0];
    if (B == 1 && manifest.utterances[first].duration > windowing.seconds) {
      infer_in_windows(model, batch.features.data(), batch.max_frames, batch.n_mels, windowing,
                       first, logprobs);
      lengths.assign(1, T2);
    } else if (T2 >= 1 && adaptation) {
      adaptation->infer(model_input(batch), logprobs, lengths);
    } else if (T2 >= 1) {  // else no utterance gives an output frame: each decodes to nothing
      model.infer(model_input(batch), logprobs, lengths);
    }
    if (T2 >= 1) {
      check_finite_logprobs(logprobs, lengths, T2, V, batch, manifest);
      cpu_ctc_loss<float>(losses.data(), nullptr, logprobs.data(), batch.targets.data(),
                          batch.target_lengths.data(), lengths.data(), nullptr, B, T2, V);
      if (outputs) outputs(batch, logprobs, lengths);
      if (beam_search) {
        decoded.clear();
        for (BeamHypothesis& best :
             beam_search->decode_batch(logprobs.data(), lengths.data(), B, T2)) {
          decoded.push_back(std::move(best.tokens));
        }
      } else {
        decoded = ctc_greedy_decode(logprobs.data(), lengths.data(), B, T2, V);
      }
    }
    for (int b = 0; b < B; ++b) {
      record(batch.utterance_indices[size_t(b)], decoded[size_t(b)], losses[size_t(b)],
             batch.target_lengths[size_t(b)]);
    }
    totals.utterances += B;
    totals.audio_seconds += batch.audio_seconds;
    if (progress) progress(size_t(totals.utterances));
  }
  return totals;
}

}  // namespace mpiasr
