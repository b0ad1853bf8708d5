// Transcript normalization on code points; see text_normalize.h.
#include "io/text_normalize.h"

#include "src/base/error.h"

namespace mpiasr {

namespace {

bool in(char32_t c, char32_t first, char32_t last) {
  return c >= first && c <= last;
}

// Simple (one-to-one) lower-case mapping of the Latin, Greek and Cyrillic
// capitals of the Basic Multilingual Plane's first blocks.
char32_t to_lower(char32_t c) {
  if (in(c, 'A', 'Z')) return c + 0x20;
  if (c < 0xC0) return c;
  if (in(c, 0xC0, 0xDE) && c != 0xD7) return c + 0x20;  // Latin-1 capitals, not the sign ×
  if (c == 0x130) return 'i';                           // İ
  if (c == 0x178) return 0xFF;                          // Ÿ
  bool even = c % 2 == 0;
  if ((in(c, 0x100, 0x137) || in(c, 0x14A, 0x177)) && even) return c + 1;  // Latin Extended-A
  if ((in(c, 0x139, 0x148) || in(c, 0x179, 0x17E)) && !even) return c + 1;
  if (in(c, 0x391, 0x3A9) && c != 0x3A2) return c + 0x20;  // Greek capitals
  if (c == 0x386) return 0x3AC;
  if (in(c, 0x388, 0x38A)) return c + 0x25;
  if (c == 0x38C) return 0x3CC;
  if (in(c, 0x38E, 0x38F)) return c + 0x3F;
  if (in(c, 0x410, 0x42F)) return c + 0x20;  // Cyrillic capitals
  if (in(c, 0x400, 0x40F)) return c + 0x50;
  if ((in(c, 0x460, 0x481) || in(c, 0x48A, 0x4BF)) && even) return c + 1;
  return c;
}

bool is_apostrophe(char32_t c) {
  return c == '\'' || c == 0x2018 || c == 0x2019 || c == 0x2BC;
}

bool is_punctuation(char32_t c) {
  if (c < 0x80) {
    return in(c, 0x21, 0x2F) || in(c, 0x3A, 0x40) || in(c, 0x5B, 0x60) || in(c, 0x7B, 0x7E);
  }
  if (in(c, 0xA1, 0xBF)) {
    // Latin-1 signs, except the letters ª µ º and the numbers ¹ ² ³ ¼ ½ ¾.
    return c != 0xAA && c != 0xB5 && c != 0xBA && c != 0xB2 && c != 0xB3 && c != 0xB9 &&
           !in(c, 0xBC, 0xBE);
  }
  return c == 0xD7 || c == 0xF7 ||  // × ÷
         in(c, 0x2010, 0x2027) ||   // dashes, quotes, bullets, ellipsis
         in(c, 0x2030, 0x205E) ||   // per mille, primes, guillemets, ...
         in(c, 0x20A0, 0x20CF) ||   // currency signs
         in(c, 0x3001, 0x303F) ||   // CJK punctuation
         in(c, 0xFF01, 0xFF0F) ||   // full-width ASCII punctuation
         in(c, 0xFF1A, 0xFF20) || in(c, 0xFF3B, 0xFF40) || in(c, 0xFF5B, 0xFF65);
}

}  // namespace

bool is_unicode_whitespace(char32_t c) {
  return in(c, 0x09, 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         in(c, 0x2000, 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

std::u32string utf8_decode(const std::string& text) {
  std::u32string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    unsigned char lead = static_cast<unsigned char>(text[i]);
    int length = lead < 0x80           ? 1
                 : (lead >> 5) == 0x6  ? 2
                 : (lead >> 4) == 0xE  ? 3
                 : (lead >> 3) == 0x1E ? 4
                                       : 0;
    if (length == 0 || i + length > text.size()) {
      MPIASR_FAIL(ExitCode::kBadInput, "invalid UTF-8 at byte " << i << " (0x" << std::hex
                                                                << int(lead) << std::dec
                                                                << ") in \"" << text << "\"");
    }
    char32_t c = length == 1   ? lead
                 : length == 2 ? lead & 0x1F
                 : length == 3 ? lead & 0x0F
                               : lead & 0x07;
    for (int k = 1; k < length; ++k) {
      unsigned char next = static_cast<unsigned char>(text[i + k]);
      if ((next & 0xC0) != 0x80) {
        MPIASR_FAIL(ExitCode::kBadInput,
                    "invalid UTF-8 continuation at byte " << i + k << " in \"" << text << "\"");
      }
      c = (c << 6) | (next & 0x3F);
    }
    static constexpr char32_t kSmallest[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < kSmallest[length] || c > 0x10FFFF || in(c, 0xD800, 0xDFFF)) {
      MPIASR_FAIL(ExitCode::kBadInput,
                  "invalid UTF-8 (overlong, surrogate or out of range) at byte " << i << " in \""
                                                                                 << text << "\"");
    }
    out.push_back(c);
    i += length;
  }
  return out;
}

void utf8_append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out.push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (c >> 6)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (c >> 12)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (c >> 18)));
    out.push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string utf8_encode(const std::u32string& code_points) {
  std::string out;
  out.reserve(code_points.size());
  for (char32_t c : code_points) utf8_append(out, c);
  return out;
}

std::string normalize_text(const std::string& text, const TextNormalizeOptions& options) {
  std::u32string mapped;
  for (char32_t c : utf8_decode(text)) {
    if (options.lower_case) c = to_lower(c);
    if (options.strip_punctuation) {
      if (is_apostrophe(c)) {
        if (!options.keep_apostrophes) continue;
        c = '\'';
      } else if (is_punctuation(c)) {
        c = ' ';
      }
    }
    mapped.push_back(c);
  }
  if (!options.collapse_whitespace) return utf8_encode(mapped);

  std::u32string collapsed;
  bool pending_space = false;
  for (char32_t c : mapped) {
    if (is_unicode_whitespace(c)) {
      pending_space = !collapsed.empty();
      continue;
    }
    if (pending_space) collapsed.push_back(' ');
    pending_space = false;
    collapsed.push_back(c);
  }
  return utf8_encode(collapsed);
}

}  // namespace mpiasr
