// A word n-gram language model estimated with interpolated modified
// Kneser-Ney smoothing (Chen & Goodman 1998, "An empirical study of smoothing
// techniques for language modeling", section 3), written as ARPA
// (model/ngram_lm.h reads it). This is what KenLM's lmplz estimates; Debian
// does not package lmplz.
//
// Sentences are <s> w1 .. wm </s> (one <s>). For an n-gram g = h w of order k
// (h: its k - 1 context words) the adjusted count is
//   a(g) = c(g), the raw count, when k = N (the highest order) or g starts with <s>
//        = N1+(. g) = |{v : c(v g) > 0}|, the number of distinct left words, otherwise.
// Discounts per order k, from the count-of-counts n_r = |{g of order k : a(g) = r}|:
//   Y = n1 / (n1 + 2 n2),  D1 = 1 - 2Y n2/n1,  D2 = 2 - 3Y n3/n2,  D3+ = 3 - 4Y n4/n3
// and D(a) is D1, D2 or D3+ for a = 1, 2, >= 3. Where some n_r is 0 or a
// discount falls outside (0, r), the order falls back to D = 0.5, 1, 1.5
// (KenLM's --discount_fallback) and says so.
// Probabilities, for a context h seen with S(h) = sum_w a(h w) > 0:
//   p(w | h) = (a(h w) - D(a(h w))) / S(h) + gamma(h) p(w | h'),  h' = h without its oldest word
//   gamma(h) = (D1 N1(h) + D2 N2(h) + D3+ N3+(h)) / S(h)
// with N_r(h) the number of words w with a(h w) = r (r >= 3 for N3+). At the
// unigram the lower order is uniform, p(w | h') = 1 / |V|, over the vocabulary
// V: every word, </s> and <unk> (which has no count, so gets only the uniform
// share); <s> is never predicted (log10 p = -99, as in ARPA files). In the
// ARPA file every n-gram with a(g) > 0 has log10 p(w | h), and every n-gram
// that is itself a context has the back-off log10 gamma: an interpolated
// model written in back-off form gives the same probabilities.
//
// Counts are held in memory (ordered maps of id vectors), which suits
// transcripts of up to some million words.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <ostream>
#include <string>
#include <vector>

#include "model/ngram_lm.h"

namespace mpiasr {

struct KneserNeyModel {
  int order = 0;
  std::vector<std::string> vocabulary;  // by id: <unk>, <s>, </s>, then the words sorted
  // Per order k (index k - 1):
  std::vector<std::array<int64_t, 4>> count_of_counts;  // n1, n2, n3, n4 of the adjusted counts
  std::vector<std::array<double, 3>> discounts;         // D1, D2, D3+
  std::vector<bool> discount_fallback;                  // the order uses 0.5, 1, 1.5
  std::vector<std::map<std::vector<int32_t>, NgramLm::Entry>> ngrams;  // log10 p, log10 back-off

  // Writes the ARPA text, n-grams in id order.
  void write_arpa(std::ostream& out) const;
};

// Estimates an order-N model from sentences given as words (no empty words;
// <s> and </s> may not appear: they are added). Throws Error(kBadInput) for
// a sentence holding <s> or </s>, or when there are no words at all.
KneserNeyModel estimate_kneser_ney(const std::vector<std::vector<std::string>>& sentences,
                                   int order);

}  // namespace mpiasr
