// `mpiasr eval --ckpt DIR --manifest M [--out hyps.tsv]`: CER and WER of a
// checkpoint on a manifest, and the hypothesis of every utterance.
//
// --dump-logprobs FILE writes what the model saw and gave, batch by batch, as
// safetensors (for checking the model elsewhere, e.g. scripts/pytorch):
//   batch.K.features [B, T, n_mels] F32   the normalized features, zero-padded
//   batch.K.frame_lengths [B] I32         valid feature frames
//   batch.K.logprobs [B, T2, V] F32       log-softmax outputs; frames >= output length are padding
//   batch.K.output_lengths [B] I32
//   batch.K.utterances [B] I64            manifest indices
// and the metadata "checkpoint" (the step folder decoded with) and
// "utterances": a JSON list, by manifest index, of {"id", "audio", "offset",
// "duration", "transcript"}.
#include <iomanip>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "io/safetensors.h"
#include "src/base/error.h"
#include "src/base/file.h"
#include "src/commands.h"
#include "src/config.h"
#include "src/dataset.h"
#include "src/decoding.h"
#include "src/recognizer.h"

namespace mpiasr {

namespace {

struct EvalOptions {
  std::string checkpoint, manifest, out, dump_logprobs;
  int threads = 0;
  int examples = 3;
  DecodingOptions decoding;
  bool skip_bad = false;  // data.skip_bad: drop bad utterances (reported) instead of failing
  std::string data_root;  // data.data_root: replaces $data_root in the manifest's paths
};

// The batches of an evaluation, kept for --dump-logprobs.
class BatchDump {
 public:
  explicit BatchDump(int vocab_size) : vocab_size_(vocab_size) {}

  void add(const Batch& batch, const std::vector<float>& logprobs,
           const std::vector<int32_t>& output_lengths) {
    const int64_t B = batch.batch_size, T = batch.max_frames, M = batch.n_mels;
    Entry e;
    e.features_shape = {B, T, M};
    e.features.assign(batch.features.data(), batch.features.data() + B * T * M);
    e.frame_lengths.assign(batch.frame_lengths.data(), batch.frame_lengths.data() + B);
    e.logprobs_shape = {B, int64_t(logprobs.size()) / (B * vocab_size_), vocab_size_};
    e.logprobs = logprobs;
    e.output_lengths = output_lengths;
    e.utterances.assign(batch.utterance_indices.begin(), batch.utterance_indices.end());
    batches_.push_back(std::move(e));
  }

  void write(const std::string& path, const Manifest& manifest,
             const std::string& checkpoint) const {
    std::vector<TensorRef> tensors;
    for (size_t k = 0; k < batches_.size(); ++k) {
      const Entry& e = batches_[k];
      const std::string prefix = "batch." + std::to_string(k) + ".";
      const int64_t B = e.features_shape[0];
      tensors.push_back(TensorRef::of(prefix + "features", e.features_shape, e.features.data()));
      tensors.push_back(TensorRef::of(prefix + "frame_lengths", {B}, e.frame_lengths.data()));
      tensors.push_back(TensorRef::of(prefix + "logprobs", e.logprobs_shape, e.logprobs.data()));
      tensors.push_back(TensorRef::of(prefix + "output_lengths", {B}, e.output_lengths.data()));
      tensors.push_back(TensorRef::of(prefix + "utterances", {B}, e.utterances.data()));
    }
    nlohmann::json utterances = nlohmann::json::array();
    for (const Utterance& u : manifest.utterances) {
      utterances.push_back({{"id", u.id},
                            {"audio", u.audio_path},
                            {"offset", u.offset},
                            {"duration", u.duration},
                            {"transcript", u.transcript}});
    }
    write_file_atomic(path,
                      serialize_safetensors(
                          tensors, {{"checkpoint", checkpoint}, {"utterances", utterances.dump()}}),
                      ExitCode::kUsage);
  }

 private:
  struct Entry {
    std::vector<int64_t> features_shape, logprobs_shape;
    std::vector<float> features, logprobs;
    std::vector<int32_t> frame_lengths, output_lengths;
    std::vector<int64_t> utterances;
  };
  int64_t vocab_size_;
  std::vector<Entry> batches_;
};

// id, reference, hypothesis and the utterance's error counts, one line each.
void write_hypotheses(const std::string& path, const Manifest& manifest,
                      const std::vector<Hypothesis>& hypotheses) {
  std::ostringstream out;
  out << "id\treference\thypothesis\tchar_errors\tchars\tword_errors\twords\n";
  for (const Hypothesis& h : hypotheses) {
    const Utterance& u = manifest.utterances[h.utterance];
    out << u.id << '\t' << u.transcript << '\t' << h.text << '\t' << h.errors.char_errors << '\t'
        << h.errors.chars << '\t' << h.errors.word_errors << '\t' << h.errors.words << '\n';
  }
  write_file(path, out.str(), ExitCode::kUsage);
}

int run_eval(const EvalOptions& options, const mpi::Context& ctx) {
  static std::ostream discard(nullptr);
  std::ostream& log = ctx.is_main() ? std::cout : discard;
  std::ostream& warnings = ctx.is_main() ? std::cerr : discard;
  const int threads = ctx.compute_threads(options.threads, "--threads");
  const CheckpointModel checkpoint = load_checkpoint_model(options.checkpoint, log, warnings);
  DatasetOptions dataset;
  dataset.keep_long = true;
  dataset.threads = threads;
  Config data_config = checkpoint.config;  // the checkpoint's features and text normalization
  data_config.data.skip_bad = options.skip_bad;
  data_config.data.data_root = options.data_root;
  const Manifest manifest = load_dataset(data_config, options.manifest, "eval", dataset, &log);
  const Decoder decoder(options.decoding, *checkpoint.tokenizer, log);
  BatchOutputs outputs;
  BatchDump dump(checkpoint.tokenizer->vocab_size());
  if (!options.dump_logprobs.empty()) {
    if (ctx.world_size() > 1) {
      MPIASR_FAIL(ExitCode::kUsage,
                  "--dump-logprobs runs on one process, not " << ctx.world_size());
    }
    outputs = [&](const Batch& batch, const std::vector<float>& logprobs,
                  const std::vector<int32_t>& lengths) { dump.add(batch, logprobs, lengths); };
  }
  const Recognition result = recognize(checkpoint, manifest, ctx, threads, log,
                                       decoder.beam_search(), outputs, options.decoding.adaptation);
  if (!options.dump_logprobs.empty()) {
    dump.write(options.dump_logprobs, manifest, checkpoint.location.dir);
    log << "log-probs: " << options.dump_logprobs << "\n";
  }
  if (!ctx.is_main()) return 0;

  const EvaluationTotals& t = result.totals;
  log << std::fixed << std::setprecision(2) << "decoded " << int64_t(t.utterances)
      << " utterances, " << t.audio_seconds / 3600 << " h of audio in " << result.seconds << " s ("
      << std::setprecision(0) << t.audio_seconds / std::max(result.seconds, 1e-9)
      << "x real time)\n"
      << std::setprecision(4) << "loss " << t.loss_per_token() << " per token\n"
      << std::setprecision(2) << "CER " << 100 * t.errors.cer() << "% (" << t.errors.char_errors
      << " errors / " << t.errors.chars << " characters)\n"
      << "WER " << 100 * t.errors.wer() << "% (" << t.errors.word_errors << " errors / "
      << t.errors.words << " words)\n"
      << std::defaultfloat;
  if (t.infeasible > 0) {
    log << int64_t(t.infeasible)
        << " utterances are shorter than their transcript allows and are left out of the loss:\n";
    constexpr size_t kShown = 20;
    size_t shown = 0;
    for (const Hypothesis& h : result.hypotheses) {
      if (h.feasible || shown++ >= kShown) continue;
      const Utterance& u = manifest.utterances[h.utterance];
      std::ostringstream what;
      what << "audio file '" << u.audio_path << "': " << u.duration << " s for "
           << checkpoint.tokenizer->encode(u.transcript).size() << " tokens";
      log << "  " << to_string(InputProblem{manifest.path, u.line, what.str()}) << "\n";
    }
    if (shown > kShown) log << "  ... and " << shown - kShown << " more\n";
  }
  const size_t examples = std::min(result.hypotheses.size(), size_t(std::max(options.examples, 0)));
  for (size_t i = 0; i < examples; ++i) {
    const Hypothesis& h = result.hypotheses[i * result.hypotheses.size() / examples];
    log << "REF: " << manifest.utterances[h.utterance].transcript << "\n"
        << "HYP: " << h.text << "\n";
  }
  if (!options.out.empty()) {
    write_hypotheses(options.out, manifest, result.hypotheses);
    log << "hypotheses: " << options.out << "\n";
  }
  return 0;
}

}  // namespace

Command add_eval_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "eval",
      "Decode a manifest with a checkpoint (greedy CTC, or beam search with a language model) "
      "and report the loss, the character "
      "error rate (CER) and the word error rate (WER). Runs on every rank under mpirun.");
  auto options = std::make_shared<EvalOptions>();
  sub->add_option("--ckpt", options->checkpoint,
                  "a checkpoint: a step-NNNNNNNN folder, a checkpoint folder (its best, else "
                  "latest), or a training output folder")
      ->required();
  sub->add_option("--manifest", options->manifest,
                  "the utterances to score (tsv, NeMo JSON lines or SpeechBrain CSV)")
      ->required();
  sub->add_option("--out", options->out,
                  "write every hypothesis here: id, reference, hypothesis, char_errors, chars, "
                  "word_errors, words (tab-separated, with a header line)");
  sub->add_option(
      "--data.skip_bad", options->skip_bad,
      "drop bad utterances (unreadable or truncated audio, NaN or infinite samples, bad "
      "transcripts), each reported with its manifest line, instead of stopping (true or "
      "false; default false)");
  sub->add_option("--data.data_root", options->data_root,
                  "the folder that $data_root in the manifest's audio paths stands for");
  sub->add_option("--threads", options->threads,
                  "CPU threads per rank, at most the cores it may use (default 0: cores / ranks)")
      ->check(CLI::Range(0, kMaxThreads));
  sub->add_option("--examples", options->examples,
                  "reference/hypothesis pairs to print (default 3)")
      ->check(CLI::Range(0, 1000000));
  add_decoding_options(*sub, options->decoding);
  sub->add_option("--dump-logprobs", options->dump_logprobs,
                  "write every batch's features, log-probs and lengths to this safetensors file "
                  "(one process only), e.g. for scripts/pytorch/check_parity.py");
  return {sub, [options](mpi::Context& ctx) { return run_eval(*options, ctx); }};
}

}  // namespace mpiasr
