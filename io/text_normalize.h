// Transcript normalization, applied before tokenization so training, decoding
// and scoring all see the same text. Works on Unicode code points: the UTF-8
// input is decoded (invalid UTF-8 is an error naming the byte offset), each
// step maps code points, and the result is encoded back to UTF-8.
//
//   lower_case           A-Z, Latin-1, Latin Extended-A, Greek and Cyrillic capitals -> small
//   strip_punctuation    punctuation and symbols (ASCII, Latin-1, General Punctuation,
//                        CJK and full-width punctuation) become a space, so "well-known"
//                        -> "well known"; apostrophes (' and the typographic U+2018/U+2019)
//                        become ' when keep_apostrophes is set, else are deleted
//                        ("don't" -> "dont")
//   collapse_whitespace  every run of Unicode white space becomes one U+0020 space and
//                        leading/trailing white space is removed
#pragma once

#include <string>

namespace mpiasr {

struct TextNormalizeOptions {
  bool lower_case = true;
  bool strip_punctuation = true;
  bool keep_apostrophes = true;
  bool collapse_whitespace = true;
};

std::string normalize_text(const std::string& text, const TextNormalizeOptions& options);

// UTF-8 <-> code points. utf8_decode rejects overlong forms, surrogates,
// truncated sequences and values above U+10FFFF.
std::u32string utf8_decode(const std::string& text);
std::string utf8_encode(const std::u32string& code_points);
void utf8_append(std::string& out, char32_t code_point);

bool is_unicode_whitespace(char32_t c);

}  // namespace mpiasr
