// `mpiasr transcribe --ckpt DIR FILE...`: prints "FILE<TAB>transcript" per
// audio file on stdout, in the order given; everything else goes to stderr.
#include <iostream>
#include <memory>
#include <sstream>

#include "io/utterance_check.h"
#include "src/base/error.h"
#include "src/commands.h"
#include "src/config.h"
#include "src/decoding.h"
#include "src/feature_pipeline.h"
#include "src/recognizer.h"
#include "src/utterance_length.h"

namespace mpiasr {

namespace {

struct TranscribeOptions {
  std::string checkpoint;
  std::vector<std::string> files;
  int threads = 0;
  DecodingOptions decoding;
  bool skip_bad = false;  // data.skip_bad: skip unreadable files (reported) instead of failing
};

int run_transcribe(const TranscribeOptions& options, const mpi::Context& ctx) {
  static std::ostream discard(nullptr);
  std::ostream& log = ctx.is_main() ? std::cerr : discard;
  const int threads = ctx.compute_threads(options.threads, "--threads");
  const CheckpointModel checkpoint = load_checkpoint_model(options.checkpoint, log, log);

  // The files as a manifest without transcripts; "line" n is the n-th file
  // (what the loader names if decoding fails: "command line:n").
  Manifest manifest;
  manifest.path = "command line";
  manifest.use_duration_cache = false;
  for (size_t i = 0; i < options.files.size(); ++i) {
    Utterance utterance;
    utterance.id = utterance.audio_path = options.files[i];
    utterance.line = int(i) + 1;
    manifest.utterances.push_back(std::move(utterance));
  }
  // With skip_bad every sample is decoded first, as in every command
  // (src/dataset.h, SampleCheck): a file with NaN or infinite samples is
  // dropped and the others are transcribed. Problems name the file (the
  // what says which), not the "manifest" the files were put in.
  ValidationOptions validation;
  validation.check_samples = options.skip_bad;
  validation.require_transcript = false;
  validation.threads = threads;
  validation.skip_bad = true;
  validation.allow_empty = true;
  const ValidationReport report = validate_manifest(manifest, validation);
  std::ostringstream problems;
  for (const InputProblem& problem : report.problems) problems << "\n  " << problem.what;
  if (report.dropped > 0 && (!options.skip_bad || report.kept == 0)) {
    MPIASR_FAIL(ExitCode::kBadInput,
                report.dropped << " of " << options.files.size() << " files cannot be transcribed"
                               << (options.skip_bad ? ", and none is left"
                                                    : "; fix them, or skip them with "
                                                      "--data.skip_bad=true")
                               << ":" << problems.str());
  }
  if (report.dropped > 0) {
    log << "transcribe: skipped " << report.dropped << " of " << options.files.size()
        << " files:" << problems.str() << "\n";
  }
  for (const InputProblem& warning : report.warnings) {
    log << "transcribe: warning: " << warning.what << "\n";
  }

  // A file too short to give an output frame is transcribed as nothing, with a warning.
  const Fbank fbank(fbank_options(checkpoint.config.features, FeatureUse::kEvaluation));
  for (const Utterance& u : manifest.utterances) {
    if (const std::optional<std::string> problem = length_problem(u.duration, {}, fbank)) {
      log << "transcribe: warning: " << u.audio_path << ": " << *problem
          << "; its transcript is empty\n";
    }
  }
  const Decoder decoder(options.decoding, *checkpoint.tokenizer, log);
  const Recognition result = recognize(checkpoint, manifest, ctx, threads, log,
                                       decoder.beam_search(), {}, options.decoding.adaptation);
  if (ctx.is_main()) {
    for (const Hypothesis& h : result.hypotheses) {
      std::cout << manifest.utterances[h.utterance].audio_path << '\t' << h.text << '\n';
    }
    std::cout.flush();
  }
  return 0;
}

}  // namespace

Command add_transcribe_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "transcribe",
      "Transcribe audio files (any format libsndfile reads, resampled to the model's rate) "
      "with a checkpoint; prints FILE<TAB>TRANSCRIPT per file on stdout.");
  auto options = std::make_shared<TranscribeOptions>();
  sub->add_option("--ckpt", options->checkpoint,
                  "a checkpoint: a step-NNNNNNNN folder, a checkpoint folder (its best, else "
                  "latest), or a training output folder")
      ->required();
  sub->add_option("files", options->files, "audio files")->required();
  sub->add_option("--data.skip_bad", options->skip_bad,
                  "skip bad files (unreadable, truncated, NaN or infinite samples; each "
                  "reported on stderr) and transcribe the others, instead of stopping (true or "
                  "false; default false)");
  sub->add_option("--threads", options->threads,
                  "CPU threads per rank, at most the cores it may use (default 0: cores / ranks)")
      ->check(CLI::Range(0, kMaxThreads));
  add_decoding_options(*sub, options->decoding);
  return {sub, [options](mpi::Context& ctx) { return run_transcribe(*options, ctx); }};
}

}  // namespace mpiasr
