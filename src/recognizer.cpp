// Recognition with a trained checkpoint; see recognizer.h.
#include "src/recognizer.h"

#include <algorithm>
#include <cmath>
#include <iomanip>
#include <optional>
#include <sstream>

#include "io/checkpoint.h"
#include "io/cmvn.h"
#include "kernels/cpu/cpu_backend.h"
#include "model/conformer.h"
#include "mpi/broadcast.h"
#include "src/base/error.h"
#include "src/batch_plan.h"
#include "src/dataset.h"
#include "src/feature_pipeline.h"
#include "src/model_config.h"
#include "src/progress.h"

namespace mpiasr {

namespace {

// One line per hypothesis: index, the four error counts, feasible (0 or 1),
// the text.
std::string serialize(const std::vector<Hypothesis>& hypotheses) {
  std::ostringstream out;
  for (const Hypothesis& h : hypotheses) {
    out << h.utterance << '\t' << h.errors.char_errors << '\t' << h.errors.chars << '\t'
        << h.errors.word_errors << '\t' << h.errors.words << '\t' << h.feasible << '\t' << h.text
        << '\n';
  }
  return out.str();
}

void deserialize(const std::string& bytes, std::vector<Hypothesis>& out) {
  std::istringstream in(bytes);
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    Hypothesis h;
    fields >> h.utterance >> h.errors.char_errors >> h.errors.chars >> h.errors.word_errors >>
        h.errors.words >> h.feasible;
    fields.get();  // the tab before the text
    std::getline(fields, h.text);
    out.push_back(std::move(h));
  }
}

// Every rank's hypotheses on world rank 0, sorted by utterance.
std::vector<Hypothesis> gather_hypotheses(const mpi::Context& ctx, std::vector<Hypothesis> local) {
  std::vector<Hypothesis> all;
  const std::string mine = serialize(local);
  for (int rank = 0; rank < ctx.world_size(); ++rank) {
    const std::string bytes =
        ctx.world_size() == 1
            ? mine
            : mpi::broadcast_bytes(ctx, rank == ctx.world_rank() ? mine : "", rank);
    if (ctx.is_main()) deserialize(bytes, all);
  }
  std::sort(all.begin(), all.end(),
            [](const Hypothesis& a, const Hypothesis& b) { return a.utterance < b.utterance; });
  return all;
}

}  // namespace

CheckpointModel load_checkpoint_model(const std::string& path, std::ostream& log,
                                      std::ostream& warnings) {
  CheckpointModel checkpoint;
  checkpoint.location =
      locate_checkpoint(path, [&](const std::string& message) { warnings << message << "\n"; });
  const CheckpointLocation& where = checkpoint.location;
  CheckpointFiles files = read_checkpoint(where.root, where.step);
  const TrainingState state = TrainingState::from_json(files.state, where.dir + "/state.json");
  checkpoint.config = load_config(where.dir + "/" + kConfigFile);
  checkpoint.tokenizer = load_tokenizer(where.dir + "/" + state.tokenizer_file);
  if (!state.cmvn_file.empty()) {
    checkpoint.cmvn_path = where.dir + "/" + state.cmvn_file;
    // Intact files can hold statistics no audio gives (a doctored copy):
    // decoding would go on with garbage features.
    try {
      CmvnStats::load(checkpoint.cmvn_path);
    } catch (const Error& e) {
      throw Error(ExitCode::kCheckpoint, "checkpoint " + where.dir + ": " + e.what());
    }
  }
  checkpoint.model_config = conformer_config(checkpoint.config, checkpoint.tokenizer->vocab_size());
  checkpoint.weights =
      tensors_from_safetensors(files.files[kModelFile], where.dir + "/" + kModelFile);
  // Intact files can hold a diverged model; it would decode to nothing with
  // a loss of 0 instead of failing.
  for (const auto& [name, tensor] : checkpoint.weights) {
    const auto bad = std::count_if(tensor.data.begin(), tensor.data.end(),
                                   [](float x) { return !std::isfinite(x); });
    if (bad > 0) {
      MPIASR_FAIL(ExitCode::kNonFinite, "checkpoint " << where.dir << ": " << kModelFile
                                                      << ": tensor '" << name << "' holds " << bad
                                                      << " non-finite values (NaN or infinity) of "
                                                      << tensor.data.size()
                                                      << ": the model diverged; use an earlier "
                                                         "checkpoint");
    }
  }
  log << "checkpoint: " << where.dir << " (step " << state.step << ")\n";
  return checkpoint;
}

Recognition recognize(const CheckpointModel& checkpoint, const Manifest& manifest,
                      const mpi::Context& ctx, int threads, std::ostream& log,
                      const CtcBeamSearch* beam_search, const BatchOutputs& outputs,
                      const AdaptationOptions& adaptation) {
  const Config& config = checkpoint.config;
  FeaturePipeline features(config, FeatureUse::kEvaluation, checkpoint.cmvn_path);
  const std::vector<double> durations = utterance_durations(manifest);
  const DecodeWindowing windowing = decode_windowing(config, features.fbank);
  BatchingConfig batching = config.batching;
  if (adaptation.steps > 0) batching.max_batch_utterances = batching.batch_size = 1;
  std::vector<std::vector<size_t>> batches = evaluation_batches(
      durations, batching, ctx.world_rank(), ctx.world_size(), windowing.seconds);
  std::vector<BatchShape> shapes =
      evaluation_batch_shapes(batches, durations, features.fbank, windowing);
  if (shapes.empty()) shapes.push_back({1, windowing.window});  // this rank has no utterance

  CpuBackend<float> backend(threads);
  Conformer<float, float> model(backend, checkpoint.model_config, BatchShapes(shapes), 0);
  log << "model: planned for " << describe_plan(model.shapes()) << ", " << std::fixed
      << std::setprecision(1) << model.arena_bytes() / double(1 << 20)
      << " MiB of activations; utterances over " << windowing.seconds
      << " s are decoded in windows\n"
      << std::defaultfloat;
  model.params().import_masters(checkpoint.weights, checkpoint.location.dir + "/" + kModelFile);
  std::optional<TestTimeAdaptation<float, float>> adapt;
  if (adaptation.steps > 0) {
    adapt.emplace(model, adaptation);
    std::ostringstream line;  // the default precision, whatever log's is
    line << "test-time adaptation: " << adaptation.steps << " Adam steps at learning rate "
         << adaptation.learning_rate << " on the output entropy at temperature "
         << adaptation.temperature << ", " << adapt->adapted_parameters()
         << " LayerNorm parameters, for each utterance alone (those over " << windowing.seconds
         << " s, decoded in windows, are not adapted)\n";
    log << line.str();
  }
  Loader loader(manifest, *checkpoint.tokenizer, features.fbank, features.global_cmvn(),
                features.loader);

  ProgressThrottle throttle(10.0);
  const size_t total = manifest.utterances.size();
  auto progress = [&](size_t done) {
    if (!ctx.is_main() || !throttle.ready()) return;
    // Every rank has about the same share, so rank 0's share stands for all.
    const double fraction = std::min(1.0, double(done * size_t(ctx.world_size())) / double(total));
    log << "decoding: " << std::fixed << std::setprecision(0) << 100 * fraction << "% of " << total
        << " utterances, elapsed " << format_duration(throttle.elapsed()) << ", ETA "
        << format_duration(throttle.elapsed() * (1 - fraction) / fraction) << std::defaultfloat
        << std::endl;
  };
  std::vector<Hypothesis> local;
  Recognition recognition;
  recognition.totals =
      evaluate(model, loader, std::move(batches), manifest, *checkpoint.tokenizer, windowing,
               &local, progress, beam_search, outputs, adapt ? &*adapt : nullptr);
  allreduce_totals(ctx, recognition.totals);
  recognition.hypotheses = gather_hypotheses(ctx, std::move(local));
  recognition.seconds = throttle.elapsed();
  return recognition;
}

}  // namespace mpiasr
