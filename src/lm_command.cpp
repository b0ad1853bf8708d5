// `mpiasr lm TEXT --out LM.arpa [--order 3]`: a word n-gram language model
// for the beam search, estimated with interpolated modified Kneser-Ney
// (model/kneser_ney.h) from a text file of one sentence per line.
//
// Lines are normalized as transcripts are by default (lower case, punctuation
// removed but apostrophes kept, white space collapsed: io/text_normalize.h),
// so the words match what the tokenizer decodes; empty lines are skipped.
// Runs on world rank 0.
#include <fstream>
#include <iomanip>
#include <iostream>
#include <memory>
#include <sstream>

#include "io/text_normalize.h"
#include "model/kneser_ney.h"
#include "src/base/error.h"
#include "src/base/file.h"
#include "src/commands.h"

namespace mpiasr {

namespace {

struct LmOptions {
  std::string text, out;
  int order = 3;
  bool normalize = true;
};

int run_lm(const LmOptions& options, const mpi::Context& ctx) {
  if (!ctx.is_main()) return 0;
  std::ifstream in(options.text, std::ios::binary);
  if (!in) MPIASR_FAIL(ExitCode::kBadInput, "text '" << options.text << "': cannot open");
  std::vector<std::vector<std::string>> sentences;
  size_t words = 0;
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (options.normalize) {
      try {
        line = normalize_text(line, TextNormalizeOptions{});
      } catch (const Error& e) {
        MPIASR_FAIL(e.code(), options.text << ":" << line_number << ": " << e.what());
      }
    }
    std::istringstream split(line);
    std::vector<std::string> sentence;
    for (std::string word; split >> word;) sentence.push_back(word);
    if (sentence.empty()) continue;
    for (const std::string& word : sentence) {
      if (word == "<s>" || word == "</s>") {
        MPIASR_FAIL(ExitCode::kBadInput, options.text << ":" << line_number << ": the word '"
                                                      << word << "' marks sentence ends");
      }
    }
    words += sentence.size();
    sentences.push_back(std::move(sentence));
  }
  if (in.bad()) MPIASR_FAIL(ExitCode::kBadInput, "text '" << options.text << "': read error");
  if (sentences.empty())
    MPIASR_FAIL(ExitCode::kBadInput, "text '" << options.text << "': no words");

  const KneserNeyModel model = estimate_kneser_ney(sentences, options.order);
  std::cout << "text: " << sentences.size() << " sentences, " << words << " words, "
            << model.vocabulary.size() - 3 << " distinct (" << options.text << ")\n";
  for (int k = 1; k <= options.order; ++k) {
    const auto& n = model.count_of_counts[size_t(k - 1)];
    const auto& d = model.discounts[size_t(k - 1)];
    std::cout << k << "-grams: " << model.ngrams[size_t(k - 1)].size() << ", count-of-counts "
              << n[0] << " " << n[1] << " " << n[2] << " " << n[3] << ", discounts "
              << std::setprecision(4) << d[0] << " " << d[1] << " " << d[2]
              << (model.discount_fallback[size_t(k - 1)]
                      ? " (fallback: too few n-grams for discounts from the counts)"
                      : "")
              << std::defaultfloat << "\n";
  }
  std::ostringstream arpa;
  model.write_arpa(arpa);
  write_file_atomic(options.out, arpa.str(), ExitCode::kUsage);
  std::cout << "language model: " << options.out << "\n";
  return 0;
}

}  // namespace

Command add_lm_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "lm",
      "Estimate a word n-gram language model (interpolated modified Kneser-Ney) from a text file "
      "of one sentence per line, and write it in ARPA format for `eval` and `transcribe` "
      "--decoder beam --lm.");
  auto options = std::make_shared<LmOptions>();
  sub->add_option("text", options->text, "the text, one sentence per line")->required();
  sub->add_option("--out", options->out, "the ARPA file to write")->required();
  sub->add_option("--order", options->order, "n-gram order (default 3)")->check(CLI::Range(1, 16));
  sub->add_flag("!--no-normalize", options->normalize,
                "use the words as written (default: lower case, punctuation removed but "
                "apostrophes kept, as transcripts are normalized)");
  return {sub, [options](mpi::Context& ctx) { return run_lm(*options, ctx); }};
}

}  // namespace mpiasr
