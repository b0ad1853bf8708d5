// How `mpiasr eval` and `mpiasr transcribe` turn log-probabilities into
// tokens: greedy CTC decoding (model/ctc_decode.h), or the CTC prefix beam
// search with an optional ARPA word language model and an optional lexicon
// (model/ctc_beam_search.h, model/ngram_lm.h, model/lexicon.h). The
// command-line options are the same for both commands:
//
//   --decoder greedy|beam   --beam N   --lm FILE.arpa   --lm-weight A   --word-bonus B
//   --lexicon WORDS.txt     --adapt-steps N   --adapt-lr R   --adapt-temperature T
//
// The --adapt options adapt the model to each utterance before it is decoded
// (src/test_time_adaptation.h), whichever decoder turns its log-probs into
// tokens.
#pragma once

#include <CLI/CLI.hpp>

#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include "io/tokenizer.h"
#include "model/ctc_beam_search.h"
#include "model/lexicon.h"
#include "model/ngram_lm.h"
#include "src/test_time_adaptation.h"

namespace mpiasr {

struct DecodingOptions {
  std::string decoder = "greedy";  // greedy or beam
  BeamSearchOptions beam;
  std::string lm_path;           // empty: no language model
  std::string lexicon_path;      // empty: any word
  AdaptationOptions adaptation;  // steps 0: none
};

// The tokens of a tokenizer for the beam search: a piece " " separates words,
// a piece beginning with U+2581 (sentencepiece's word marker) starts one; the
// marker is not part of the word.
std::vector<CtcToken> ctc_tokens(const Tokenizer& tokenizer);

// Adds the decoding options to a subcommand.
void add_decoding_options(CLI::App& command, DecodingOptions& options);

// The beam search the options ask for (null for greedy decoding), with its
// language model and lexicon. Throws Error(kUsage) for options that need the
// beam (--lm, --lexicon) given with --decoder greedy.
class Decoder {
 public:
  Decoder(const DecodingOptions& options, const Tokenizer& tokenizer, std::ostream& log);
  // Null for greedy decoding.
  const CtcBeamSearch* beam_search() const { return search_ ? &*search_ : nullptr; }

 private:
  std::optional<NgramLm> lm_;
  std::optional<Lexicon> lexicon_;
  std::optional<CtcBeamSearch> search_;
};

}  // namespace mpiasr
