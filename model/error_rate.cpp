// Character and word error rates: UTF-8 decoding, word splitting and the
// mergeable counts.
#include "model/error_rate.h"

#include <limits>

#include "src/base/error.h"

namespace mpiasr {
namespace {

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

// Names the offending byte (or the end of a truncated sequence) and the text.
[[noreturn]] void fail_utf8(std::string_view text, size_t offset) {
  if (offset == text.size())
    MPIASR_FAIL(ExitCode::kBadInput,
                "invalid UTF-8: sequence cut off at the end of \"" << text << "\"");
  MPIASR_FAIL(ExitCode::kBadInput, "invalid UTF-8: byte 0x"
                                       << std::hex << int(static_cast<unsigned char>(text[offset]))
                                       << std::dec << " at offset " << offset << " of \"" << text
                                       << "\"");
}

double ratio(int64_t errors, int64_t total) {
  if (total == 0) return errors == 0 ? 0.0 : std::numeric_limits<double>::infinity();
  return static_cast<double>(errors) / static_cast<double>(total);
}

}  // namespace

std::vector<char32_t> utf8_characters(std::string_view text) {
  std::vector<char32_t> characters;
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char lead = static_cast<unsigned char>(text[i]);
    if (is_space(text[i])) {
      while (i < text.size() && is_space(text[i])) ++i;
      if (!characters.empty() && i < text.size()) characters.push_back(U' ');
      continue;
    }
    const int extra = lead < 0x80             ? 0
                      : (lead & 0xE0) == 0xC0 ? 1
                      : (lead & 0xF0) == 0xE0 ? 2
                      : (lead & 0xF8) == 0xF0 ? 3
                                              : -1;
    if (extra < 0) fail_utf8(text, i);
    if (i + extra >= text.size()) fail_utf8(text, text.size());
    char32_t code = extra == 0 ? lead : lead & (0x3F >> extra);
    for (int k = 1; k <= extra; ++k) {
      const unsigned char next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) fail_utf8(text, i + k);
      code = (code << 6) | (next & 0x3F);
    }
    characters.push_back(code);
    i += extra + 1;
  }
  return characters;
}

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> words;
  size_t i = 0;
  while (i < text.size()) {
    while (i < text.size() && is_space(text[i])) ++i;
    size_t start = i;
    while (i < text.size() && !is_space(text[i])) ++i;
    if (i > start) words.emplace_back(text.substr(start, i - start));
  }
  return words;
}

void ErrorCounts::add(std::string_view ref, std::string_view hyp) {
  const std::vector<char32_t> ref_chars = utf8_characters(ref);
  char_errors += edit_distance(ref_chars, utf8_characters(hyp));
  chars += static_cast<int64_t>(ref_chars.size());
  const std::vector<std::string> ref_words = split_words(ref);
  word_errors += edit_distance(ref_words, split_words(hyp));
  words += static_cast<int64_t>(ref_words.size());
}

void ErrorCounts::merge(const ErrorCounts& other) {
  char_errors += other.char_errors;
  chars += other.chars;
  word_errors += other.word_errors;
  words += other.words;
}

double ErrorCounts::cer() const {
  return ratio(char_errors, chars);
}
double ErrorCounts::wer() const {
  return ratio(word_errors, words);
}

}  // namespace mpiasr
