// sentencepiece tokenizer; see sentencepiece_tokenizer.h.
#include "io/sentencepiece_tokenizer.h"

#include <sentencepiece_trainer.h>

#include <cstdlib>
#include <unordered_map>

#include "io/text_normalize.h"
#include "src/base/error.h"
#include "src/base/file.h"

namespace mpiasr {

namespace {

// Feeds the transcripts to the trainer in order, without a temporary file.
class TranscriptIterator : public sentencepiece::SentenceIterator {
 public:
  explicit TranscriptIterator(const std::vector<std::string>& transcripts)
      : transcripts_(transcripts) {}
  bool done() const override { return next_ >= transcripts_.size(); }
  void Next() override { ++next_; }
  const std::string& value() const override { return transcripts_[next_]; }
  sentencepiece::util::Status status() const override { return {}; }

 private:
  const std::vector<std::string>& transcripts_;
  size_t next_ = 0;
};

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(std::string model_proto, const std::string& origin)
    : model_proto_(std::move(model_proto)) {
  auto status = processor_.LoadFromSerializedProto(model_proto_);
  if (!status.ok() || processor_.GetPieceSize() == 0) {
    MPIASR_FAIL(ExitCode::kBadInput, origin << " is neither a mpiasr character vocabulary nor a "
                                               "sentencepiece model ("
                                            << status.ToString() << ")");
  }
}

std::unique_ptr<SentencePieceTokenizer> SentencePieceTokenizer::train(
    const std::vector<std::string>& transcripts, const std::string& model_type, int vocab_size) {
  MPIASR_CHECK(model_type == "bpe" || model_type == "unigram",
               "sentencepiece model type \"" << model_type << "\" (expected bpe or unigram)");
  MPIASR_CHECK(vocab_size >= 3,
               "sentencepiece vocab_size " << vocab_size << " (blank included) is too small");
  std::unordered_map<std::string, std::string> options = {
      {"model_type", model_type},
      {"vocab_size", std::to_string(vocab_size - 1)},  // pieces; the blank is added in front
      {"character_coverage", "1.0"},
      {"normalization_rule_name", "identity"},
      {"bos_id", "-1"},
      {"eos_id", "-1"},
      {"unk_id", "0"},
      {"num_threads", "1"},
      {"input_sentence_size", "0"},
      {"shuffle_input_sentence", "false"},
      {"minloglevel", "1"},
  };
  TranscriptIterator sentences(transcripts);
  std::string model_proto;
  auto status = sentencepiece::SentencePieceTrainer::Train(options, &sentences, &model_proto);
  if (!status.ok()) {
    // The message starts with sentencepiece's source location and the failed
    // condition, "./src/x.cc(660) [cond] what"; keep the what.
    std::string what = status.message();
    if (const size_t end = what.find("] "); what.starts_with("./") && end != std::string::npos) {
      what.erase(0, end + 2);
    }
    // "Vocabulary size too high (4999). Please set it to a value <= 95."
    const size_t limit = what.find("<= ");
    if (what.starts_with("Vocabulary size too high") && limit != std::string::npos) {
      const int most_pieces = std::atoi(what.c_str() + limit + 3);
      MPIASR_FAIL(ExitCode::kUsage,
                  "a " << model_type << " vocabulary of " << vocab_size
                       << " (blank included) is more than the " << transcripts.size()
                       << " training transcripts allow: at most " << most_pieces + 1
                       << " (lower tokenizer.vocab_size, or use tokenizer.type char)");
    }
    MPIASR_FAIL(ExitCode::kBadInput, "sentencepiece "
                                         << model_type << " training on " << transcripts.size()
                                         << " transcripts with vocab_size " << vocab_size
                                         << " failed: " << what);
  }
  return std::make_unique<SentencePieceTokenizer>(std::move(model_proto), "trained model");
}

std::vector<int> SentencePieceTokenizer::encode(const std::string& text) const {
  auto pieces = processor_.EncodeAsImmutableProto(text);
  std::vector<int> ids;
  ids.reserve(pieces.pieces_size());
  for (size_t k = 0; k < pieces.pieces_size(); ++k) {
    auto piece = pieces.pieces(static_cast<int>(k));
    int id = static_cast<int>(piece.id());
    if (processor_.IsUnknown(id)) {
      for (char32_t c : utf8_decode(piece.surface())) {
        if (!is_unicode_whitespace(c)) count_oov(c);
      }
      continue;
    }
    ids.push_back(id + 1);
  }
  return ids;
}

std::string SentencePieceTokenizer::decode(const std::vector<int>& ids) const {
  std::vector<int> pieces;
  pieces.reserve(ids.size());
  for (int id : ids) {
    MPIASR_CHECK(id >= 0 && id < vocab_size(),
                 "token id " << id << " outside [0, " << vocab_size() << ")");
    if (id != kBlank) pieces.push_back(id - 1);
  }
  std::string text;
  auto status = processor_.Decode(pieces, &text);
  MPIASR_CHECK(status.ok(), "sentencepiece decode failed: " << status.ToString());
  return text;
}

std::string SentencePieceTokenizer::piece(int id) const {
  MPIASR_CHECK(id >= 1 && id < vocab_size(),
               "token id " << id << " outside [1, " << vocab_size() << ")");
  const int p = id - 1;
  if (processor_.IsUnknown(p) || processor_.IsControl(p)) return "";
  return processor_.IdToPiece(p);
}

void SentencePieceTokenizer::save(const std::string& path) const {
  write_file_atomic(path, model_proto_, ExitCode::kUsage);
}

}  // namespace mpiasr
