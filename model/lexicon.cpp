// A decoding lexicon; see lexicon.h.
#include "model/lexicon.h"

#include <algorithm>
#include <fstream>

#include "src/base/error.h"

namespace mpiasr {

namespace {

bool has_blank(std::string_view word) {
  return word.find_first_of(" \t") != word.npos;
}

}  // namespace

Lexicon Lexicon::read(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) MPIASR_FAIL(ExitCode::kBadInput, "lexicon '" << path << "': cannot open");
  std::vector<std::string> words;
  int line_number = 0;
  for (std::string line; std::getline(in, line);) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    if (has_blank(line)) {
      MPIASR_FAIL(ExitCode::kBadInput, path << ":" << line_number << ": '" << line
                                            << "' is not one word (a space or a tab)");
    }
    words.push_back(std::move(line));
  }
  if (words.empty()) MPIASR_FAIL(ExitCode::kBadInput, "lexicon '" << path << "': no words");
  return of_words(std::move(words));
}

Lexicon Lexicon::of_words(std::vector<std::string> words) {
  for (const std::string& word : words) {
    if (word.empty() || has_blank(word))
      MPIASR_FAIL(ExitCode::kBadInput, "lexicon word '" << word << "' is not one word");
  }
  std::sort(words.begin(), words.end());
  words.erase(std::unique(words.begin(), words.end()), words.end());
  Lexicon lexicon;
  lexicon.words_ = std::move(words);
  return lexicon;
}

bool Lexicon::contains(std::string_view word) const {
  return std::binary_search(words_.begin(), words_.end(), word);
}

bool Lexicon::begins_word(std::string_view prefix) const {
  const auto first = std::lower_bound(words_.begin(), words_.end(), prefix);
  return first != words_.end() && std::string_view(*first).starts_with(prefix);
}

}  // namespace mpiasr
