// The beam search's view of a tokenizer (ctc_tokens): for the characters
// tokenizer and for sentencepiece BPE, the words the search forms from a
// sentence's tokens (ctc_words) are the sentence's words.
#include "src/decoding.h"

#include <gtest/gtest.h>

#include <sstream>

#include "io/char_tokenizer.h"

namespace mpiasr {
namespace {

std::vector<std::string> split(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

const std::vector<std::string> kSentences = {
    "the quick brown fox", "jumps over the lazy dog", "a dog and a fox",
    "over and over again", "quick quick brown",       "the end of the story is near",
    "brown dogs run",      "lazy afternoons",         "the fox is quick and brown"};

TEST(CtcTokens, CharactersSeparateWordsAtTheSpace) {
  auto tokenizer = CharTokenizer::from_transcripts(kSentences);
  const std::vector<CtcToken> tokens = ctc_tokens(*tokenizer);
  ASSERT_EQ(int(tokens.size()), tokenizer->vocab_size());
  EXPECT_TRUE(tokens[1].separates_words);  // ' ' sorts first
  EXPECT_EQ(tokens[2].text, "a");
  for (const std::string& sentence : kSentences) {
    const std::vector<int> ids = tokenizer->encode(sentence);
    EXPECT_EQ(ctc_words(tokens, std::vector<int32_t>(ids.begin(), ids.end())), split(sentence));
  }
}

TEST(CtcTokens, SentencePieceStartsWordsAtTheMarker) {
  std::vector<std::string> corpus;
  for (int i = 0; i < 20; ++i) corpus.insert(corpus.end(), kSentences.begin(), kSentences.end());
  auto tokenizer = train_tokenizer(corpus, TokenizerOptions{"bpe", 40});
  const std::vector<CtcToken> tokens = ctc_tokens(*tokenizer);
  int word_starts = 0;
  for (const CtcToken& token : tokens) word_starts += token.starts_word;
  EXPECT_GT(word_starts, 0);
  for (const std::string& sentence : kSentences) {
    const std::vector<int> ids = tokenizer->encode(sentence);
    EXPECT_EQ(ctc_words(tokens, std::vector<int32_t>(ids.begin(), ids.end())), split(sentence))
        << sentence;
  }
}

}  // namespace
}  // namespace mpiasr
