// Tokenizers: text <-> token ids for CTC. Every tokenizer reserves id 0 for
// the CTC blank, so encode() returns ids in [1, vocab_size()) and decode()
// skips 0. Characters the vocabulary cannot represent are dropped from the
// encoding, counted per code point, and listed by oov_report(), so a caller
// can say how much of a corpus its vocabulary missed.
//
// Two kinds, one interface (see char_tokenizer.h, sentencepiece_tokenizer.h):
//   char           one token per Unicode code point seen in the training text
//   bpe / unigram  a sentencepiece model; piece id p is our id p + 1
// A tokenizer is saved to one file; load_tokenizer() recognises the kind
// from the file's contents.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace mpiasr {

class Tokenizer {
 public:
  static constexpr int kBlank = 0;

  Tokenizer() = default;
  Tokenizer(const Tokenizer&) = delete;
  Tokenizer& operator=(const Tokenizer&) = delete;
  virtual ~Tokenizer() = default;

  // Ids in [1, vocab_size()); never the blank. Safe to call from several threads.
  virtual std::vector<int> encode(const std::string& text) const = 0;
  // Skips blanks; an id outside [0, vocab_size()) is an error.
  virtual std::string decode(const std::vector<int>& ids) const = 0;
  // The text of token id in [1, vocab_size()): its character, or its
  // sentencepiece piece with the U+2581 word-start marker kept; "" for pieces
  // without text (<unk>, control pieces).
  virtual std::string piece(int id) const = 0;
  // Number of model outputs, blank included.
  virtual int vocab_size() const = 0;
  // Replaces `path` atomically (src/base/file.h, write_file_atomic); throws
  // Error(kUsage) naming the file and why it cannot be written.
  virtual void save(const std::string& path) const = 0;
  // "char" or "sentencepiece".
  virtual std::string kind() const = 0;

  // Out-of-vocabulary code points dropped by encode() since construction.
  size_t oov_count() const;
  // "N out-of-vocabulary characters dropped: 'é' U+00E9 x3, ..." or "" when none.
  std::string oov_report() const;

 protected:
  void count_oov(char32_t code_point) const;

 private:
  mutable std::mutex oov_mutex_;
  mutable std::map<char32_t, size_t> oov_counts_;
};

struct TokenizerOptions {
  std::string kind = "char";  // "char", "bpe" or "unigram"
  int vocab_size = 256;       // bpe/unigram: model outputs including blank
};

// Builds a tokenizer from (already normalized) training transcripts.
std::unique_ptr<Tokenizer> train_tokenizer(const std::vector<std::string>& transcripts,
                                           const TokenizerOptions& options);

// Loads a file written by Tokenizer::save(), or any sentencepiece .model.
std::unique_ptr<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace mpiasr
