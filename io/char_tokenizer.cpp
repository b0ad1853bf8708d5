// Character tokenizer; see char_tokenizer.h.
#include "io/char_tokenizer.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <set>

#include "io/text_normalize.h"
#include "src/base/error.h"
#include "src/base/file.h"

namespace mpiasr {

namespace {

bool needs_escape(char32_t c) {
  return c < 0x20 || (c >= 0x7F && c < 0xA0) || is_unicode_whitespace(c);
}

std::string token_text(char32_t c) {
  if (c == ' ') return "<space>";
  if (needs_escape(c)) {
    char escaped[16];
    std::snprintf(escaped, sizeof escaped, "<U+%04X>", static_cast<unsigned>(c));
    return escaped;
  }
  std::string text;
  utf8_append(text, c);
  return text;
}

char32_t parse_token(const std::string& token, const std::string& path, int line) {
  if (token == "<space>") return ' ';
  if (token.size() > 4 && token.rfind("<U+", 0) == 0 && token.back() == '>') {
    std::string hex = token.substr(3, token.size() - 4);
    size_t used = 0;
    unsigned long value = 0;
    try {
      value = std::stoul(hex, &used, 16);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used == hex.size() && value <= 0x10FFFF) return static_cast<char32_t>(value);
  } else {
    std::u32string code_points = utf8_decode(token);
    if (code_points.size() == 1 && !needs_escape(code_points[0])) return code_points[0];
  }
  MPIASR_FAIL(ExitCode::kBadInput, path << ":" << line << ": bad token \"" << token
                                        << "\" (expected one character, <space> or <U+XXXX>)");
}

}  // namespace

CharTokenizer::CharTokenizer(std::u32string alphabet) : alphabet_(std::move(alphabet)) {
  MPIASR_CHECK(std::is_sorted(alphabet_.begin(), alphabet_.end()) &&
                   std::adjacent_find(alphabet_.begin(), alphabet_.end()) == alphabet_.end(),
               "the alphabet must be sorted and unique");
}

std::unique_ptr<CharTokenizer> CharTokenizer::from_transcripts(
    const std::vector<std::string>& transcripts) {
  std::set<char32_t> seen;
  for (const std::string& text : transcripts) {
    for (char32_t c : utf8_decode(text)) seen.insert(c);
  }
  MPIASR_CHECK(!seen.empty(), "no characters in the " << transcripts.size() << " transcripts");
  return std::make_unique<CharTokenizer>(std::u32string(seen.begin(), seen.end()));
}

std::unique_ptr<CharTokenizer> CharTokenizer::from_file(const std::string& path) {
  std::ifstream file(path);
  if (!file) MPIASR_FAIL(ExitCode::kBadInput, "cannot open character vocabulary " << path);
  std::string line;
  if (!std::getline(file, line) || line != kFileHeader) {
    MPIASR_FAIL(ExitCode::kBadInput, path << ":1: expected the header \"" << kFileHeader
                                          << "\", found \"" << line << "\"");
  }
  std::u32string alphabet;
  int line_number = 1;
  int expected_id = 0;
  while (std::getline(file, line)) {
    ++line_number;
    if (line.empty()) continue;
    size_t space = line.rfind(' ');
    std::string token = space == std::string::npos ? "" : line.substr(0, space);
    std::string id_text = space == std::string::npos ? line : line.substr(space + 1);
    if (id_text != std::to_string(expected_id)) {
      MPIASR_FAIL(ExitCode::kBadInput, path << ":" << line_number << ": expected id " << expected_id
                                            << ", found \"" << line << "\"");
    }
    if (expected_id == kBlank) {
      if (token != "<blank>") {
        MPIASR_FAIL(ExitCode::kBadInput, path << ":" << line_number
                                              << ": id 0 must be <blank>, found \"" << token
                                              << "\"");
      }
    } else {
      char32_t c = parse_token(token, path, line_number);
      if (!alphabet.empty() && c <= alphabet.back()) {
        MPIASR_FAIL(ExitCode::kBadInput, path << ":" << line_number << ": token \"" << token
                                              << "\" is out of code-point order or repeated");
      }
      alphabet.push_back(c);
    }
    ++expected_id;
  }
  if (alphabet.empty()) MPIASR_FAIL(ExitCode::kBadInput, path << ": no tokens besides <blank>");
  return std::make_unique<CharTokenizer>(std::move(alphabet));
}

std::vector<int> CharTokenizer::encode(const std::string& text) const {
  std::vector<int> ids;
  for (char32_t c : utf8_decode(text)) {
    auto found = std::lower_bound(alphabet_.begin(), alphabet_.end(), c);
    if (found == alphabet_.end() || *found != c) {
      count_oov(c);
      continue;
    }
    ids.push_back(static_cast<int>(found - alphabet_.begin()) + 1);
  }
  return ids;
}

std::string CharTokenizer::decode(const std::vector<int>& ids) const {
  std::string text;
  for (int id : ids) {
    MPIASR_CHECK(id >= 0 && id < vocab_size(),
                 "token id " << id << " outside [0, " << vocab_size() << ")");
    if (id != kBlank) utf8_append(text, alphabet_[id - 1]);
  }
  return text;
}

std::string CharTokenizer::piece(int id) const {
  MPIASR_CHECK(id >= 1 && id < vocab_size(),
               "token id " << id << " outside [1, " << vocab_size() << ")");
  std::string text;
  utf8_append(text, alphabet_[size_t(id - 1)]);
  return text;
}

void CharTokenizer::save(const std::string& path) const {
  std::string text = std::string(kFileHeader) + "\n<blank> 0\n";
  for (size_t k = 0; k < alphabet_.size(); ++k)
    text += token_text(alphabet_[k]) + " " + std::to_string(k + 1) + "\n";
  write_file_atomic(path, text, ExitCode::kUsage);
}

}  // namespace mpiasr
