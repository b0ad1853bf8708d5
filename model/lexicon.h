// A decoding lexicon: the set of words the CTC beam search
// (model/ctc_beam_search.h) may write. A prefix whose word in progress begins
// no word of the lexicon is dropped, and a word ends only where it is a whole
// word of the lexicon.
//
// File format: one word per line, taken verbatim (no case folding), blank
// lines skipped; a line holding a space or a tab is an error that names the
// file, the line and the text. /usr/share/dict word lists (Debian's
// wamerican) are such files once lower-cased for a lower-case tokenizer.
//
// Storage: the distinct words, sorted, so contains() is a binary search and
// begins_word(p) checks the first word not below p: every word beginning
// with p sorts at or after p and before anything that does not.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace mpiasr {

class Lexicon {
 public:
  // Reads a word list; throws Error(kBadInput) naming the file (cannot open,
  // no words) or the file and line (a word with a space or a tab).
  static Lexicon read(const std::string& path);
  // The lexicon of these words (duplicates allowed); throws Error(kBadInput)
  // for an empty word or one holding a space or a tab.
  static Lexicon of_words(std::vector<std::string> words);

  bool contains(std::string_view word) const;
  // Whether some word of the lexicon begins with `prefix` (the empty prefix
  // begins every word).
  bool begins_word(std::string_view prefix) const;
  size_t size() const { return words_.size(); }

 private:
  std::vector<std::string> words_;  // sorted, distinct
};

}  // namespace mpiasr
