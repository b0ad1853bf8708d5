// Character tokenizer: the vocabulary is the sorted set of Unicode code
// points of the training transcripts; id 0 is the blank, code point k of
// the sorted alphabet is id k + 1 (the space, when present, is a token too).
//
// File format (text, UTF-8), one token per line as "<token> <id>", ids 0..V-1 in order:
//   mpiasr char vocabulary v1
//   <blank> 0
//   <space> 1
//   ' 2
//   a 3
// A token is the character itself, or <space> for U+0020, or <U+XXXX> for
// any other white-space or control character.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/tokenizer.h"

namespace mpiasr {

class CharTokenizer : public Tokenizer {
 public:
  static constexpr const char* kFileHeader = "mpiasr char vocabulary v1";

  // alphabet: the code points of ids 1..V-1, sorted, unique.
  explicit CharTokenizer(std::u32string alphabet);

  static std::unique_ptr<CharTokenizer> from_transcripts(
      const std::vector<std::string>& transcripts);
  static std::unique_ptr<CharTokenizer> from_file(const std::string& path);

  std::vector<int> encode(const std::string& text) const override;
  std::string decode(const std::vector<int>& ids) const override;
  std::string piece(int id) const override;
  int vocab_size() const override { return static_cast<int>(alphabet_.size()) + 1; }
  void save(const std::string& path) const override;
  std::string kind() const override { return "char"; }

 private:
  std::u32string alphabet_;
};

}  // namespace mpiasr
