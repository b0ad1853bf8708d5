// sentencepiece tokenizer (BPE or unigram). Our id 0 is the CTC blank and
// sentencepiece piece id p is our id p + 1, so vocab_size() = pieces + 1 and
// any sentencepiece model loads unchanged. Models trained here have no
// <s>/</s> pieces (bos_id = eos_id = -1), piece 0 is <unk>, and text
// normalization is left to normalize_text() (normalization_rule_name =
// identity). encode() drops <unk> pieces and counts their characters as
// out-of-vocabulary; decode() joins pieces and turns the ▁ word marker back
// into spaces.
//
// Training is deterministic: one thread, every sentence used in order
// (input_sentence_size = 0, no shuffling), character coverage 1.0.
#pragma once

#include <sentencepiece_processor.h>

#include <memory>
#include <string>
#include <vector>

#include "io/tokenizer.h"

namespace mpiasr {

class SentencePieceTokenizer : public Tokenizer {
 public:
  // model_proto: the bytes of a .model file; origin names it in errors.
  SentencePieceTokenizer(std::string model_proto, const std::string& origin);

  // model_type "bpe" or "unigram"; vocab_size counts the blank.
  static std::unique_ptr<SentencePieceTokenizer> train(const std::vector<std::string>& transcripts,
                                                       const std::string& model_type,
                                                       int vocab_size);

  std::vector<int> encode(const std::string& text) const override;
  std::string decode(const std::vector<int>& ids) const override;
  std::string piece(int id) const override;
  int vocab_size() const override { return processor_.GetPieceSize() + 1; }
  void save(const std::string& path) const override;
  std::string kind() const override { return "sentencepiece"; }

 private:
  std::string model_proto_;
  sentencepiece::SentencePieceProcessor processor_;
};

}  // namespace mpiasr
