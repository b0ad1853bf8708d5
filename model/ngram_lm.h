// A word n-gram language model in the ARPA back-off format, the text format
// that SRILM, KenLM and `mpiasr lm` write:
//
//   \data\                      the header: one count per order 1..N
//   ngram 1=<count>
//   \1-grams:
//   <log10 p>  <w>  [<log10 backoff>]
//   \2-grams:
//   <log10 p>  <w1> <w2>  [<log10 backoff>]
//   ...
//   \end\                       the end of the model
//
// Fields are separated by spaces or tabs; a missing backoff is 0 (log10 1).
// Probabilities and back-offs stay log10, as the file stores them. For a word
// w after the context h = w1..wk (oldest first):
//
//   log10 P(w | h) = log10 p(h w)                      when "h w" is listed
//                  = log10 b(h) + log10 P(w | w2..wk)  otherwise
//
// with b(h) = 0 when h itself is not listed, and the recursion ending at the
// unigram. A word outside the vocabulary is <unk> when the model lists it, and
// otherwise gets kMissingUnknownLog10 (KenLM's convention). Contexts longer
// than N - 1 words use their last N - 1.
//
// Storage: one hash table per order from the n-gram (its word ids) to
// (log10 p, log10 b), so a lookup is one hash of at most N ids.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace mpiasr {

class NgramLm {
 public:
  static constexpr double kMissingUnknownLog10 = -100.0;
  static constexpr int32_t kNoWord = -1;

  struct Entry {
    float log10_prob = 0;
    float log10_backoff = 0;
  };

  // Reads an ARPA file; throws Error(kBadInput) naming the file, the line and
  // what is wrong (a malformed line, a count that does not match the header,
  // an n-gram of unknown words, a missing section).
  static NgramLm read_arpa(const std::string& path);
  // The same from ARPA text; `source` names it in errors.
  static NgramLm parse_arpa(std::string_view text, const std::string& source);

  int order() const { return int(ngrams_.size()); }
  size_t ngram_count(int n) const { return ngrams_[size_t(n - 1)].size(); }
  size_t vocabulary_size() const { return words_.size(); }
  const std::string& word(int32_t id) const { return words_[size_t(id)]; }

  // The id of a word; <unk>'s id for a word outside the vocabulary, or kNoWord
  // when the model has no <unk>.
  int32_t word_id(std::string_view word) const;
  int32_t sentence_start() const { return sentence_start_; }  // <s>
  int32_t sentence_end() const { return sentence_end_; }      // </s>

  // log10 P(word | context), context oldest first (any length; the last N - 1
  // words are used). word may be kNoWord (gets kMissingUnknownLog10).
  double log10_prob(std::span<const int32_t> context, int32_t word) const;

  // Scores `word` after `context` and appends it, keeping the last N - 1 words:
  // the state a left-to-right decoder carries. Returns log10 P(word | context).
  double advance(std::vector<int32_t>& context, int32_t word) const;

  // The context of a sentence's first word: {<s>}.
  std::vector<int32_t> start_context() const { return {sentence_start_}; }

  // log10 P(<s> words </s>) = sum of each word's and </s>'s log10 P given
  // the words before it.
  double sentence_log10(std::span<const std::string> words) const;

  // The listed entry of an n-gram (ids, oldest first), if any.
  std::optional<Entry> find(std::span<const int32_t> ngram) const;

 private:
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(std::u32string_view key) const {
      return std::hash<std::u32string_view>{}(key);
    }
  };
  using Table = std::unordered_map<std::u32string, Entry, KeyHash, std::equal_to<>>;

  const Entry* lookup(std::span<const int32_t> ngram) const;

  std::vector<std::string> words_;
  std::unordered_map<std::string, int32_t> word_ids_;
  std::vector<Table> ngrams_;  // [order - 1]
  int32_t unknown_ = kNoWord, sentence_start_ = kNoWord, sentence_end_ = kNoWord;
};

}  // namespace mpiasr
