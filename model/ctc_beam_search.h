// CTC prefix beam search (Hannun et al. 2014, "First-pass large vocabulary
// continuous speech recognition using bi-directional recurrent DNNs") with an
// optional word n-gram language model (model/ngram_lm.h).
//
// The objective of a labelling l (token ids, blank = 0 excluded) of the
// frames x, with its words W(l) (below):
//   score(l) = ln P_ctc(l | x) + alpha ln P_lm(<s> W(l) </s>) + beta |W(l)|
// P_ctc sums over every alignment (frame path) that collapses to l; alpha is
// lm_weight (on natural logs: ln P = ln(10) log10 P), beta the word insertion
// bonus. Without a language model the alpha term is 0.
//
// Words: a token adds its text to the current word; a word-separator token
// (the characters tokenizer's space) ends the current word and adds nothing; a
// word-start token (sentencepiece's U+2581 prefix) ends the current word and
// begins a new one with its text. The last word ends with the labelling.
// Empty words do not count.
//
// Search, frame by frame: every prefix in the beam keeps the log-probability
// of its alignments ending in a blank and in a non-blank, as sums (p_b, p_nb)
// and as maxima over single alignments (v_b, v_nb), extended by
//   blank          l   : p_b  += (p_b + p_nb) y_0
//   repeat last c  l   : p_nb += p_nb y_c
//   new token c    l+c : p_nb += (p_b + p_nb) y_c, or p_b y_c when c is l's last token
// (in probability terms; the code works on logs) and the same with max for v.
// A word that a new token completes is scored by the language model then
// (alpha ln P(word | previous words) + beta), once per prefix. The beam keeps
// the `beam` prefixes with the best max(v_b, v_nb) + language-model score:
// pruning by the best single alignment makes a beam of 1 follow the greedy
// path exactly, and keeps the greedy prefix in every beam when there is no
// language model and no word bonus. Tokens more than token_prune below the frame's best
// log-probability are not tried as new tokens.
//
// At the end the surviving prefixes and the greedy labelling are scored
// exactly (their last word and </s> scored, ln P_ctc from the CTC forward
// recursion over all T frames) and ranked by score(l). So the result never
// scores below greedy decoding, and with a beam wide enough to keep every
// prefix it is the labelling of highest score.
//
// With a lexicon (model/lexicon.h) the search writes only its words: a new
// token is not tried where the word in progress would then begin no word of
// the lexicon, or where it ends a word (a separator, a word-start token) that
// is not one of the lexicon's; the final candidates are the prefixes whose
// last word is empty or whole, and the greedy labelling only when every word
// of it is in the lexicon. Among the labellings whose words are all in the
// lexicon, the result never scores below the greedy one (when it is among
// them) and a wide enough beam finds the best. Where no prefix of the beam
// ends on a whole word, the result is the greedy labelling, alone.
//
//   logprobs [frames, V] float, log-softmax outputs of one utterance
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "model/lexicon.h"
#include "model/ngram_lm.h"

namespace mpiasr {

// What a token id means for word formation; index 0 (the blank) is unused.
struct CtcToken {
  std::string text;              // the characters it adds to its word
  bool separates_words = false;  // a space: ends the current word
  bool starts_word = false;      // a U+2581 piece: ends the current word, begins a new one
};

// The words of a labelling.
std::vector<std::string> ctc_words(const std::vector<CtcToken>& tokens,
                                   const std::vector<int32_t>& labelling);

struct BeamSearchOptions {
  int beam = 16;
  double lm_weight = 0.5;   // alpha
  double word_bonus = 0.0;  // beta, per word
  double token_prune = 20;  // nats below the frame's best token; infinity tries every token
};

struct BeamHypothesis {
  std::vector<int32_t> tokens;
  std::vector<std::string> words;
  double ctc_log_prob = 0;  // ln P_ctc(tokens | x)
  double lm_log10 = 0;      // log10 P_lm(<s> words </s>); 0 without a language model
  double score = 0;         // the objective above
};

class CtcBeamSearch {
 public:
  // tokens[k] describes token id k; lm and lexicon may be null. Both must
  // outlive the search.
  CtcBeamSearch(std::vector<CtcToken> tokens, const NgramLm* lm, BeamSearchOptions options,
                const Lexicon* lexicon = nullptr);

  // Every final candidate (the beam's prefixes and the greedy labelling,
  // without duplicates, as the lexicon allows), best score first.
  // Thread-safe: searches share nothing mutable.
  std::vector<BeamHypothesis> search(const float* logprobs, int frames) const;
  // The best of search().
  BeamHypothesis decode(const float* logprobs, int frames) const;
  // The best of every utterance of a padded batch logprobs [B, T, V] with
  // lengths [B] valid frames, utterances decoded in parallel (OpenMP).
  std::vector<BeamHypothesis> decode_batch(const float* logprobs, const int32_t* lengths, int B,
                                           int T) const;

  const BeamSearchOptions& options() const { return options_; }

 private:
  std::vector<CtcToken> tokens_;
  const NgramLm* lm_;
  BeamSearchOptions options_;
  const Lexicon* lexicon_;
};

}  // namespace mpiasr
