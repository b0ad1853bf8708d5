// Decoding options of eval and transcribe; see decoding.h.
#include "src/decoding.h"

#include "src/base/error.h"

namespace mpiasr {

std::vector<CtcToken> ctc_tokens(const Tokenizer& tokenizer) {
  constexpr std::string_view kWordStart = "\xE2\x96\x81";  // U+2581
  std::vector<CtcToken> tokens(size_t(tokenizer.vocab_size()));
  for (int id = 1; id < tokenizer.vocab_size(); ++id) {
    CtcToken& token = tokens[size_t(id)];
    token.text = tokenizer.piece(id);
    if (token.text == " ") {
      token.text.clear();
      token.separates_words = true;
    } else if (token.text.starts_with(kWordStart)) {
      token.text.erase(0, kWordStart.size());
      token.starts_word = true;
    }
  }
  return tokens;
}

void add_decoding_options(CLI::App& command, DecodingOptions& options) {
  command
      .add_option("--decoder", options.decoder,
                  "greedy (default): the best token of every frame; beam: CTC prefix beam "
                  "search, with a word language model when --lm is given")
      ->check(CLI::IsMember({"greedy", "beam"}));
  command.add_option("--beam", options.beam.beam, "beam width of --decoder beam (default 16)")
      ->check(CLI::PositiveNumber);
  command.add_option("--lm", options.lm_path,
                     "word n-gram language model in ARPA format for --decoder beam (`mpiasr lm` "
                     "makes one from text)");
  command.add_option("--lm-weight", options.beam.lm_weight,
                     "weight alpha of the language model's natural-log probability (default 0.5)");
  command.add_option("--word-bonus", options.beam.word_bonus,
                     "score beta added per word, against the language model's bias towards "
                     "fewer words (default 0)");
  command.add_option("--lexicon", options.lexicon_path,
                     "word list, one word per line, for --decoder beam: the search writes only "
                     "its words (default: any word)");
  command
      .add_option("--adapt-steps", options.adaptation.steps,
                  "test-time adaptation: before decoding an utterance, take this many Adam "
                  "steps on the LayerNorm parameters down the entropy of the model's outputs "
                  "on that utterance alone, then restore them (default 0: none)")
      ->check(CLI::Range(0, 1000));
  command
      .add_option("--adapt-lr", options.adaptation.learning_rate,
                  "learning rate of --adapt-steps (default 0.001)")
      ->check(CLI::PositiveNumber);
  command
      .add_option("--adapt-temperature", options.adaptation.temperature,
                  "temperature of the outputs whose entropy --adapt-steps lowers (default 1)")
      ->check(CLI::PositiveNumber);
}

Decoder::Decoder(const DecodingOptions& options, const Tokenizer& tokenizer, std::ostream& log) {
  if (options.decoder == "greedy") {
    if (!options.lm_path.empty()) {
      MPIASR_FAIL(ExitCode::kUsage, "--lm " << options.lm_path << " needs --decoder beam");
    }
    if (!options.lexicon_path.empty()) {
      MPIASR_FAIL(ExitCode::kUsage,
                  "--lexicon " << options.lexicon_path << " needs --decoder beam");
    }
    log << "decoder: greedy\n";
    return;
  }
  if (!options.lm_path.empty()) lm_ = NgramLm::read_arpa(options.lm_path);
  if (!options.lexicon_path.empty()) lexicon_ = Lexicon::read(options.lexicon_path);
  search_.emplace(ctc_tokens(tokenizer), lm_ ? &*lm_ : nullptr, options.beam,
                  lexicon_ ? &*lexicon_ : nullptr);
  log << "decoder: beam " << options.beam.beam;
  if (lm_) {
    log << ", language model " << options.lm_path << " (" << lm_->order() << "-gram, "
        << lm_->vocabulary_size() << " words), weight " << options.beam.lm_weight;
  }
  log << ", word bonus " << options.beam.word_bonus;
  if (lexicon_)
    log << ", lexicon " << options.lexicon_path << " (" << lexicon_->size() << " words)";
  log << "\n";
}

}  // namespace mpiasr
