// `mpiasr import librispeech|commonvoice|kaldi SRC --out MANIFEST`: writes an
// mpiasr manifest from a corpus in another toolkit's layout (io/corpus_import.h)
// and reports the entries kept, the hours of audio and every entry dropped
// with its reason. Runs on world rank 0.
#include <iostream>
#include <memory>

#include "io/corpus_import.h"
#include "src/base/error.h"
#include "src/commands.h"

namespace mpiasr {

namespace {

struct ImportOptions {
  std::string kind, source, out;
  bool strict = false;  // any dropped entry fails the import, and no manifest is written
};

int run_import(const ImportOptions& options, const mpi::Context& ctx) {
  if (!ctx.is_main()) return 0;
  const ImportReport report = options.kind == "librispeech"   ? import_librispeech(options.source)
                              : options.kind == "commonvoice" ? import_common_voice(options.source)
                                                              : import_kaldi(options.source);
  if (options.strict && !report.dropped.empty()) {
    MPIASR_FAIL(ExitCode::kBadInput, options.kind << " " << options.source << ": with --strict "
                                                  << report.dropped.size()
                                                  << " dropped entries fail the import; no "
                                                     "manifest written: "
                                                  << report.summary());
  }
  write_manifest(options.out, report.utterances);
  std::cout << options.kind << " " << options.source << ": " << report.summary() << "\n"
            << "manifest: " << options.out << "\n";
  return 0;
}

}  // namespace

Command add_import_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "import",
      "Write an mpiasr manifest from a LibriSpeech folder, a Common Voice TSV or a Kaldi data "
      "directory, checking every audio header; prints the entries kept, the hours and each "
      "entry dropped with its reason (file:line: what).");
  auto options = std::make_shared<ImportOptions>();
  sub->add_option("kind", options->kind,
                  "librispeech (a folder above <speaker>/<chapter>/*.trans.txt), commonvoice (a "
                  "release's TSV, clips/ beside it) or kaldi (a folder with wav.scp, text and "
                  "optionally segments)")
      ->required()
      ->check(CLI::IsMember({"librispeech", "commonvoice", "kaldi"}));
  sub->add_option("source", options->source, "the corpus folder or TSV file")->required();
  sub->add_option("--out", options->out,
                  "the manifest to write; its extension picks the format: .jsonl (NeMo, keeps "
                  "durations and segments), .tsv or .csv (SpeechBrain)")
      ->required();
  sub->add_flag("--strict", options->strict,
                "fail (exit 3, no manifest written) when any entry is dropped");
  sub->footer(
      "Faulty entries (a missing or unreadable audio file, a Kaldi command or archive offset, a "
      "line that does not parse, an empty transcript, ...) are dropped and each is listed; the "
      "manifest holds the others. Exit codes: 0 when at least one entry is kept, 3 when none is "
      "(or, with --strict, when any entry is dropped), 2 for a bad command line.");
  return {sub, [options](mpi::Context& ctx) { return run_import(*options, ctx); }};
}

}  // namespace mpiasr
