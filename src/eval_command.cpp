// `mpiasr eval --ckpt DIR --manifest M [--out hyps.tsv]`: CER and WER of a
// checkpoint on a manifest, and the hypothesis of every utterance.
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>

#include "src/base/error.h"
#include "src/commands.h"
#include "src/dataset.h"
#include "src/recognizer.h"

namespace mpiasr {

namespace {

struct EvalOptions {
  std::string checkpoint, manifest, out;
  int threads = 0;
  int examples = 3;
};

// id, reference, hypothesis and the utterance's error counts, one line each.
void write_hypotheses(const std::string& path, const Manifest& manifest,
                      const std::vector<Hypothesis>& hypotheses) {
  std::ofstream out(path);
  if (!out) MPIASR_FAIL(ExitCode::kFailure, "cannot write " << path);
  out << "id\treference\thypothesis\tchar_errors\tchars\tword_errors\twords\n";
  for (const Hypothesis& h : hypotheses) {
    const Utterance& u = manifest.utterances[h.utterance];
    out << u.id << '\t' << u.transcript << '\t' << h.text << '\t' << h.errors.char_errors << '\t'
        << h.errors.chars << '\t' << h.errors.word_errors << '\t' << h.errors.words << '\n';
  }
  if (!out.flush()) MPIASR_FAIL(ExitCode::kFailure, "cannot write " << path);
}

int run_eval(const EvalOptions& options, const mpi::Context& ctx) {
  static std::ostream discard(nullptr);
  std::ostream& log = ctx.is_main() ? std::cout : discard;
  const CheckpointModel checkpoint = load_checkpoint_model(options.checkpoint, log);
  DatasetOptions dataset;
  dataset.keep_long = true;
  const Manifest manifest =
      load_dataset(checkpoint.config, options.manifest, "eval", dataset, &log);
  const int threads = options.threads > 0 ? options.threads : ctx.default_threads();
  const Recognition result = recognize(checkpoint, manifest, ctx, threads, log);
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
        << " utterances are shorter than their transcript allows and are left out of the loss\n";
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
      "Decode a manifest with a checkpoint (greedy CTC) and report the loss, the character "
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
  sub->add_option("--threads", options->threads, "CPU threads per rank (default: cores / ranks)");
  sub->add_option("--examples", options->examples,
                  "reference/hypothesis pairs to print (default 3)");
  return {sub, [options](mpi::Context& ctx) { return run_eval(*options, ctx); }};
}

}  // namespace mpiasr
