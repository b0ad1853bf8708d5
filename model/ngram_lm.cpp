// ARPA reading and back-off scoring; see ngram_lm.h.
#include "model/ngram_lm.h"

#include <charconv>
#include <cmath>
#include <fstream>
#include <sstream>

#include "src/base/error.h"

namespace mpiasr {

namespace {

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    const size_t start = i;
    while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
    if (i > start) fields.push_back(line.substr(start, i - start));
  }
  return fields;
}

bool parse_float(std::string_view text, float& value) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() && std::isfinite(value);
}

std::u32string key_of(std::span<const int32_t> ngram) {
  return std::u32string(ngram.begin(), ngram.end());
}

template <typename Int>
bool parse_int(std::string_view text, Int& value) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size();
}

// The N of a section header "\N-grams:"; 0 when the line is not one.
int section_order(std::string_view line) {
  const std::vector<std::string_view> fields = split_fields(line);
  constexpr std::string_view kSuffix = "-grams:";
  int n = 0;
  if (fields.size() != 1 || !fields[0].ends_with(kSuffix) ||
      !parse_int(fields[0].substr(1, fields[0].size() - 1 - kSuffix.size()), n)) {
    return 0;
  }
  return n;
}

// "ngram N=count" (spaces allowed around '=').
bool parse_count_line(std::string_view line, int& n, long long& count) {
  std::string compact;
  for (char c : line) {
    if (c != ' ' && c != '\t') compact += c;
  }
  if (!compact.starts_with("ngram")) return false;
  const size_t equals = compact.find('=');
  if (equals == std::string::npos) return false;
  return parse_int(std::string_view(compact).substr(5, equals - 5), n) &&
         parse_int(std::string_view(compact).substr(equals + 1), count) && n >= 1 && count >= 0;
}

}  // namespace

NgramLm NgramLm::read_arpa(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) MPIASR_FAIL(ExitCode::kBadInput, "language model '" << path << "': cannot open");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_arpa(text.str(), path);
}

NgramLm NgramLm::parse_arpa(std::string_view text, const std::string& source) {
  NgramLm lm;
  std::vector<size_t> declared;  // ngram counts from \data\, [order - 1]
  enum class Part { kPreamble, kData, kNgrams, kEnd } part = Part::kPreamble;
  int section = 0;  // the n of the \n-grams: section being read
  int line_number = 0;
  std::vector<int32_t> ids;
  auto fail = [&](const std::string& what) {
    MPIASR_FAIL(ExitCode::kBadInput, source << ":" << line_number << ": " << what);
  };
  auto end_section = [&] {
    if (section > 0 && lm.ngrams_[size_t(section - 1)].size() != declared[size_t(section - 1)]) {
      fail("the " + std::to_string(section) + "-gram section has " +
           std::to_string(lm.ngrams_[size_t(section - 1)].size()) + " entries, \\data\\ says " +
           std::to_string(declared[size_t(section - 1)]));
    }
  };

  size_t position = 0;
  while (position < text.size() && part != Part::kEnd) {
    size_t newline = text.find('\n', position);
    if (newline == std::string_view::npos) newline = text.size();
    std::string_view line = text.substr(position, newline - position);
    position = newline + 1;
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::vector<std::string_view> fields = split_fields(line);
    if (fields.empty()) continue;

    if (fields[0] == "\\data\\") {
      if (part != Part::kPreamble) fail("a second \\data\\ section");
      part = Part::kData;
      continue;
    }
    if (part == Part::kPreamble) continue;  // text before \data\ is a comment
    if (fields[0] == "\\end\\") {
      end_section();
      part = Part::kEnd;
      break;
    }
    if (fields[0].starts_with('\\')) {  // \N-grams:
      const int n = section_order(line);
      if (n <= 0)
        fail("expected a section header like \\2-grams:, found '" + std::string(line) + "'");
      if (n != section + 1 || n > int(declared.size())) {
        fail("section \\" + std::to_string(n) + "-grams: out of order (after " +
             (section == 0 ? std::string("\\data\\") : "\\" + std::to_string(section) + "-grams:") +
             ", with " + std::to_string(declared.size()) + " orders declared)");
      }
      end_section();
      section = n;
      part = Part::kNgrams;
      continue;
    }
    if (part == Part::kData) {
      int n = 0;
      long long count = -1;
      if (!parse_count_line(line, n, count)) {
        fail("expected 'ngram N=count', found '" + std::string(line) + "'");
      }
      if (n != int(declared.size()) + 1) {
        fail("'ngram " + std::to_string(n) + "=' out of order: expected ngram " +
             std::to_string(declared.size() + 1));
      }
      declared.push_back(size_t(count));
      lm.ngrams_.emplace_back();
      lm.ngrams_.back().reserve(size_t(count));
      continue;
    }

    // An n-gram line: log10 p, n words, optional log10 backoff.
    const int n = section;
    if (fields.size() != size_t(n) + 1 && fields.size() != size_t(n) + 2) {
      fail("a " + std::to_string(n) + "-gram line needs a probability, " + std::to_string(n) +
           " word(s) and an optional back-off, found " + std::to_string(fields.size()) +
           " fields: '" + std::string(line) + "'");
    }
    Entry entry;
    if (!parse_float(fields[0], entry.log10_prob)) {
      fail("probability '" + std::string(fields[0]) + "' is not a number");
    }
    if (fields.size() == size_t(n) + 2 && !parse_float(fields.back(), entry.log10_backoff)) {
      fail("back-off '" + std::string(fields.back()) + "' is not a number");
    }
    if (entry.log10_prob > 0) {
      fail("probability " + std::string(fields[0]) + " is above log10 1 = 0");
    }
    ids.clear();
    for (int k = 1; k <= n; ++k) {
      const std::string word(fields[size_t(k)]);
      auto found = lm.word_ids_.find(word);
      if (n == 1) {
        if (found != lm.word_ids_.end()) fail("unigram '" + word + "' is listed twice");
        const int32_t id = int32_t(lm.words_.size());
        lm.words_.push_back(word);
        lm.word_ids_.emplace(word, id);
        if (word == "<unk>") lm.unknown_ = id;
        if (word == "<s>") lm.sentence_start_ = id;
        if (word == "</s>") lm.sentence_end_ = id;
        ids.push_back(id);
      } else {
        if (found == lm.word_ids_.end()) fail("word '" + word + "' is not among the unigrams");
        ids.push_back(found->second);
      }
    }
    if (!lm.ngrams_[size_t(n - 1)].emplace(key_of(ids), entry).second) {
      fail("the " + std::to_string(n) + "-gram '" + std::string(line) + "' is listed twice");
    }
  }
  if (part != Part::kEnd) {
    MPIASR_FAIL(ExitCode::kBadInput,
                source << ": "
                       << (part == Part::kPreamble ? "no \\data\\ section" : "no \\end\\ line")
                       << " (is this an ARPA file?)");
  }
  if (declared.empty())
    MPIASR_FAIL(ExitCode::kBadInput, source << ": \\data\\ declares no n-grams");
  if (lm.sentence_start_ == kNoWord || lm.sentence_end_ == kNoWord) {
    MPIASR_FAIL(ExitCode::kBadInput, source << ": the unigrams lack <s> or </s>");
  }
  return lm;
}

int32_t NgramLm::word_id(std::string_view word) const {
  auto found = word_ids_.find(std::string(word));
  return found == word_ids_.end() ? unknown_ : found->second;
}

const NgramLm::Entry* NgramLm::lookup(std::span<const int32_t> ngram) const {
  if (ngram.empty() || ngram.size() > ngrams_.size()) return nullptr;
  std::u32string_view key(reinterpret_cast<const char32_t*>(ngram.data()), ngram.size());
  const Table& table = ngrams_[ngram.size() - 1];
  auto found = table.find(key);
  return found == table.end() ? nullptr : &found->second;
}

std::optional<NgramLm::Entry> NgramLm::find(std::span<const int32_t> ngram) const {
  const Entry* entry = lookup(ngram);
  return entry ? std::optional<Entry>(*entry) : std::nullopt;
}

double NgramLm::log10_prob(std::span<const int32_t> context, int32_t word) const {
  if (word == kNoWord) return kMissingUnknownLog10;
  const size_t max_context = ngrams_.size() - 1;
  if (context.size() > max_context) context = context.last(max_context);
  // The longest listed n-gram (context suffix, word), plus the back-offs of
  // the longer contexts that did not list it.
  int32_t ngram[64];
  MPIASR_CHECK(ngrams_.size() <= 64, "order " << ngrams_.size());
  double backoff = 0;
  for (size_t skip = 0; skip <= context.size(); ++skip) {
    const std::span<const int32_t> history = context.subspan(skip);
    std::copy(history.begin(), history.end(), ngram);
    ngram[history.size()] = word;
    if (const Entry* entry = lookup(std::span<const int32_t>(ngram, history.size() + 1))) {
      return backoff + entry->log10_prob;
    }
    if (const Entry* entry = lookup(history)) backoff += entry->log10_backoff;
  }
  // Not even a unigram: only possible for ids of another model.
  MPIASR_FAIL(ExitCode::kFailure, "word id " << word << " is not in the language model");
}

double NgramLm::advance(std::vector<int32_t>& context, int32_t word) const {
  const double log10 = log10_prob(context, word);
  context.push_back(word);
  const size_t keep = ngrams_.size() - 1;
  if (context.size() > keep) context.erase(context.begin(), context.end() - long(keep));
  return log10;
}

double NgramLm::sentence_log10(std::span<const std::string> words) const {
  std::vector<int32_t> context = start_context();
  double total = 0;
  for (const std::string& word : words) total += advance(context, word_id(word));
  return total + advance(context, sentence_end_);
}

}  // namespace mpiasr
