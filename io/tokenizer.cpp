// The shared part of every tokenizer: out-of-vocabulary accounting, and
// choosing the kind when training or loading. See tokenizer.h.
#include "io/tokenizer.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "io/char_tokenizer.h"
#include "io/sentencepiece_tokenizer.h"
#include "io/text_normalize.h"
#include "src/base/error.h"

namespace mpiasr {

void Tokenizer::count_oov(char32_t code_point) const {
  std::lock_guard<std::mutex> lock(oov_mutex_);
  ++oov_counts_[code_point];
}

size_t Tokenizer::oov_count() const {
  std::lock_guard<std::mutex> lock(oov_mutex_);
  size_t total = 0;
  for (const auto& [code_point, count] : oov_counts_) total += count;
  return total;
}

std::string Tokenizer::oov_report() const {
  size_t total = oov_count();
  if (total == 0) return "";
  std::lock_guard<std::mutex> lock(oov_mutex_);
  std::ostringstream out;
  out << total << " out-of-vocabulary characters dropped:";
  for (const auto& [code_point, count] : oov_counts_) {
    char hex[16];
    std::snprintf(hex, sizeof hex, "U+%04X", static_cast<unsigned>(code_point));
    std::string glyph;
    if (!is_unicode_whitespace(code_point) && code_point >= 0x20) utf8_append(glyph, code_point);
    out << " '" << glyph << "' " << hex << " x" << count;
  }
  return out.str();
}

std::unique_ptr<Tokenizer> train_tokenizer(const std::vector<std::string>& transcripts,
                                           const TokenizerOptions& options) {
  if (options.kind == "char") return CharTokenizer::from_transcripts(transcripts);
  if (options.kind == "bpe" || options.kind == "unigram") {
    return SentencePieceTokenizer::train(transcripts, options.kind, options.vocab_size);
  }
  MPIASR_FAIL(ExitCode::kUsage,
              "unknown tokenizer kind \"" << options.kind << "\" (expected char, bpe or unigram)");
}

std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) MPIASR_FAIL(ExitCode::kBadInput, "cannot open tokenizer file " << path);
  std::string first_line;
  std::getline(file, first_line);
  if (first_line == CharTokenizer::kFileHeader) return CharTokenizer::from_file(path);
  std::ostringstream bytes;
  file.clear();
  file.seekg(0);
  bytes << file.rdbuf();
  return std::make_unique<SentencePieceTokenizer>(bytes.str(), path);
}

}  // namespace mpiasr
