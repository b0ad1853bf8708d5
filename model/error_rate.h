// Error rates of recognized text against reference text.
//
// Edit distance: the Levenshtein distance, the fewest substitutions, insertions
// and deletions that turn ref into hyp, by the two-row dynamic programme
//   D(i, 0) = i, D(0, j) = j,
//   D(i, j) = min(D(i-1, j) + 1, D(i, j-1) + 1, D(i-1, j-1) + [ref_i != hyp_j]).
// CER = sum of character edit distances / sum of reference characters, over
// Unicode code points (text is UTF-8) after whitespace runs are collapsed to
// one space and trimmed, so "the cat" has 7 characters.
// WER = sum of word edit distances / sum of reference words, words split on
// whitespace.
// ErrorCounts keeps the four integer sums, so ranks add them up (merge, or an
// all-reduce of the four fields) and divide once at the end.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace mpiasr {

template <typename Token>
int64_t edit_distance(const std::vector<Token>& ref, const std::vector<Token>& hyp) {
  std::vector<int64_t> previous(hyp.size() + 1), current(hyp.size() + 1);
  for (size_t j = 0; j <= hyp.size(); ++j) previous[j] = static_cast<int64_t>(j);
  for (size_t i = 1; i <= ref.size(); ++i) {
    current[0] = static_cast<int64_t>(i);
    for (size_t j = 1; j <= hyp.size(); ++j) {
      int64_t substitute = previous[j - 1] + (ref[i - 1] == hyp[j - 1] ? 0 : 1);
      current[j] = std::min({previous[j] + 1, current[j - 1] + 1, substitute});
    }
    std::swap(previous, current);
  }
  return previous[hyp.size()];
}

// The code points of UTF-8 text, whitespace runs collapsed to one space and
// trimmed. Invalid UTF-8 throws an Error naming the byte and its offset.
std::vector<char32_t> utf8_characters(std::string_view text);

// The whitespace-separated words of text.
std::vector<std::string> split_words(std::string_view text);

struct ErrorCounts {
  int64_t char_errors = 0;
  int64_t chars = 0;  // reference characters
  int64_t word_errors = 0;
  int64_t words = 0;  // reference words

  // Adds one utterance: its reference and its hypothesis.
  void add(std::string_view ref, std::string_view hyp);
  void merge(const ErrorCounts& other);
  // char_errors / chars and word_errors / words; 0 when there is nothing to
  // count, +inf when there are errors against an empty reference.
  double cer() const;
  double wer() const;
};

}  // namespace mpiasr
