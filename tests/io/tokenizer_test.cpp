// Text normalization and tokenizers: UTF-8 handling, normalization rules,
// character and sentencepiece (BPE, unigram) round trips, save/load, the
// blank never produced, out-of-vocabulary accounting.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>

#include "io/char_tokenizer.h"
#include "io/sentencepiece_tokenizer.h"
#include "io/text_normalize.h"
#include "io/tokenizer.h"
#include "src/base/error.h"
#include "tests/base/temp_dir.h"

namespace mpiasr {
namespace {

// A few hundred distinct lower-case sentences of 5-14 words, fixed for the seed.
std::vector<std::string> make_sentences(int count, uint64_t seed) {
  static const char* kWords[] = {
      "the",    "a",       "speech", "model",     "learns", "to",       "hear",    "words",
      "quick",  "brown",   "fox",    "jumps",     "over",   "lazy",     "dog",     "don't",
      "can't",  "it's",    "every",  "night",     "river",  "mountain", "quietly", "sings",
      "under",  "bright",  "stars",  "while",     "people", "wander",   "through", "old",
      "towns",  "with",    "many",   "houses",    "and",    "gardens",  "full",    "of",
      "yellow", "flowers", "zebra",  "xylophone", "jazz",   "quiz",     "vexing",  "whisky"};
  const int num_words = sizeof(kWords) / sizeof(kWords[0]);
  std::vector<std::string> sentences;
  uint64_t state = seed;
  auto next = [&state](int n) {
    state = state * 6364136223846793005ULL + 1442695040888963407ULL;
    return static_cast<int>((state >> 33) % n);
  };
  for (int s = 0; s < count; ++s) {
    std::string sentence;
    int length = 5 + next(10);
    for (int w = 0; w < length; ++w) {
      if (w) sentence += ' ';
      sentence += kWords[next(num_words)];
    }
    sentences.push_back(sentence);
  }
  return sentences;
}

std::string read_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(file), {});
}

TEST(Utf8, EncodesKnownBytes) {
  EXPECT_EQ(utf8_encode(U"a"), "a");
  EXPECT_EQ(utf8_encode(U"\u00e9"), "\xC3\xA9");
  EXPECT_EQ(utf8_encode(U"\u20ac"), "\xE2\x82\xAC");
  EXPECT_EQ(utf8_encode(U"\U0001F600"), "\xF0\x9F\x98\x80");
}

TEST(Utf8, EveryCodePointRoundTrips) {
  std::u32string all;
  for (char32_t c = 1; c <= 0x10FFFF; ++c) {
    if (c < 0xD800 || c > 0xDFFF) all.push_back(c);
  }
  EXPECT_EQ(utf8_decode(utf8_encode(all)), all);
}

TEST(Utf8, RejectsInvalidSequences) {
  for (const std::string& bad :
       {std::string("ab\xC3"), std::string("\xC0\xAF"), std::string("\xED\xA0\x80"),
        std::string("\xF4\x90\x80\x80"), std::string("\x80"), std::string("\xE2\x28\xA1")}) {
    try {
      utf8_decode(bad);
      ADD_FAILURE() << "accepted invalid UTF-8";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ExitCode::kBadInput);
      EXPECT_THAT(error.what(), testing::HasSubstr("invalid UTF-8"));
    }
  }
}

TEST(NormalizeText, DefaultRules) {
  TextNormalizeOptions options;
  EXPECT_EQ(
      normalize_text("  Hello,   World!\tIt\u2019s  a WELL-known \u00c9T\u00c9 \u00bbfact\u00ab.  ",
                     options),
      "hello world it's a well known \u00e9t\u00e9 fact");
  EXPECT_EQ(
      normalize_text("\u0393\u0395\u0399\u0391 \u041f\u0420\u0418\u0412\u0415\u0422", options),
      "\u03b3\u03b5\u03b9\u03b1 \u043f\u0440\u0438\u0432\u0435\u0442");
  EXPECT_EQ(normalize_text("\u00bd \u00b2 \u00b5", options),
            "\u00bd \u00b2 \u00b5");  // not punctuation
  EXPECT_EQ(normalize_text("...", options), "");
}

TEST(NormalizeText, OptionsSwitchRulesOff) {
  TextNormalizeOptions no_apostrophes;
  no_apostrophes.keep_apostrophes = false;
  EXPECT_EQ(normalize_text("Don't STOP", no_apostrophes), "dont stop");

  TextNormalizeOptions keep_case;
  keep_case.lower_case = false;
  EXPECT_EQ(normalize_text("Don't, STOP", keep_case), "Don't STOP");

  TextNormalizeOptions keep_punctuation;
  keep_punctuation.strip_punctuation = false;
  EXPECT_EQ(normalize_text("Don\u2019t, STOP!", keep_punctuation), "don\u2019t, stop!");

  TextNormalizeOptions keep_spaces;
  keep_spaces.collapse_whitespace = false;
  EXPECT_EQ(normalize_text(" a,\tb ", keep_spaces), " a \tb ");
}

TEST(CharTokenizer, VocabularyIsSortedCodePointsAfterBlank) {
  auto tokenizer = CharTokenizer::from_transcripts({"ba c", "\u00e9a"});
  EXPECT_EQ(tokenizer->vocab_size(), 6);  // blank, ' ', a, b, c, é
  EXPECT_EQ(tokenizer->encode(" abc\u00e9"), (std::vector<int>{1, 2, 3, 4, 5}));
  EXPECT_EQ(tokenizer->decode({0, 3, 0, 2, 1, 5}), "ba \u00e9");
  EXPECT_THROW(tokenizer->decode({6}), Error);
  EXPECT_THROW(tokenizer->decode({-1}), Error);
}

TEST(CharTokenizer, PiecesAreTheCharacters) {
  auto tokenizer = CharTokenizer::from_transcripts({"ba c", "\u00e9a"});
  EXPECT_EQ(tokenizer->piece(1), " ");
  EXPECT_EQ(tokenizer->piece(2), "a");
  EXPECT_EQ(tokenizer->piece(5), "\u00e9");
  EXPECT_THROW(tokenizer->piece(0), Error);
  EXPECT_THROW(tokenizer->piece(6), Error);
}

TEST(CharTokenizer, RoundTripsNormalizedText) {
  auto sentences = make_sentences(300, 1);
  auto tokenizer = CharTokenizer::from_transcripts(sentences);
  for (const std::string& sentence : sentences) {
    std::vector<int> ids = tokenizer->encode(sentence);
    EXPECT_EQ(ids.size(), sentence.size());  // ASCII: one token per byte
    for (int id : ids) {
      EXPECT_GT(id, Tokenizer::kBlank);
      EXPECT_LT(id, tokenizer->vocab_size());
    }
    EXPECT_EQ(tokenizer->decode(ids), sentence);
  }
  EXPECT_EQ(tokenizer->oov_count(), 0u);
  EXPECT_EQ(tokenizer->oov_report(), "");
}

TEST(CharTokenizer, SavesAndLoads) {
  TempDir dir;
  auto tokenizer = CharTokenizer::from_transcripts({"hello world", "tab\there \u00e9\u20ac <x>"});
  tokenizer->save(dir.file("tokens.txt"));
  auto loaded = load_tokenizer(dir.file("tokens.txt"));
  EXPECT_EQ(loaded->kind(), "char");
  EXPECT_EQ(loaded->vocab_size(), tokenizer->vocab_size());
  std::string text = "hello\tworld \u20ac <x>";
  EXPECT_EQ(loaded->encode(text), tokenizer->encode(text));
  EXPECT_EQ(loaded->decode(loaded->encode(text)), text);
  EXPECT_THAT(read_bytes(dir.file("tokens.txt")),
              testing::HasSubstr("<blank> 0\n<U+0009> 1\n<space> 2\n< 3\n"));
}

TEST(CharTokenizer, CountsAndDropsOutOfVocabularyCharacters) {
  auto tokenizer = CharTokenizer::from_transcripts({"hello world"});
  EXPECT_EQ(tokenizer->encode("h\u00e9llo w\u00f6rld\u00e9"), tokenizer->encode("hllo wrld"));
  EXPECT_EQ(tokenizer->oov_count(), 3u);
  EXPECT_EQ(tokenizer->oov_report(),
            "3 out-of-vocabulary characters dropped: '\u00e9' U+00E9 x2 '\u00f6' U+00F6 x1");
}

TEST(CharTokenizer, RejectsBadFilesNamingTheLine) {
  TempDir dir;
  std::ofstream(dir.file("bad.txt")) << CharTokenizer::kFileHeader << "\n<blank> 0\na 1\nbc 2\n";
  try {
    CharTokenizer::from_file(dir.file("bad.txt"));
    ADD_FAILURE() << "accepted a two-character token";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), testing::HasSubstr(dir.file("bad.txt") + ":4: bad token \"bc\""));
  }
  std::ofstream(dir.file("gap.txt")) << CharTokenizer::kFileHeader << "\n<blank> 0\na 2\n";
  EXPECT_THROW(CharTokenizer::from_file(dir.file("gap.txt")), Error);
  std::ofstream(dir.file("garbage.bin")) << "not a tokenizer";
  try {
    load_tokenizer(dir.file("garbage.bin"));
    ADD_FAILURE() << "accepted garbage";
  } catch (const Error& error) {
    EXPECT_THAT(error.what(), testing::HasSubstr("garbage.bin is neither"));
  }
}

class SentencePiece : public testing::TestWithParam<std::string> {};

TEST_P(SentencePiece, TrainsDeterministicallyAndRoundTrips) {
  TempDir dir;
  auto sentences = make_sentences(300, 2);
  TokenizerOptions options{GetParam(), 72};
  auto tokenizer = train_tokenizer(sentences, options);
  EXPECT_EQ(tokenizer->vocab_size(), 72);
  EXPECT_EQ(tokenizer->kind(), "sentencepiece");
  size_t total_tokens = 0, total_chars = 0;
  for (const std::string& sentence : make_sentences(100, 3)) {  // held-out sentences
    std::vector<int> ids = tokenizer->encode(sentence);
    for (int id : ids) {
      EXPECT_GT(id, Tokenizer::kBlank);
      EXPECT_LT(id, tokenizer->vocab_size());
    }
    EXPECT_EQ(tokenizer->decode(ids), sentence);
    total_tokens += ids.size();
    total_chars += sentence.size();
  }
  EXPECT_LT(total_tokens, total_chars);  // pieces span several characters
  EXPECT_EQ(tokenizer->oov_count(), 0u);

  tokenizer->save(dir.file("a.model"));
  train_tokenizer(sentences, options)->save(dir.file("b.model"));
  EXPECT_EQ(read_bytes(dir.file("a.model")), read_bytes(dir.file("b.model")));

  auto loaded = load_tokenizer(dir.file("a.model"));
  EXPECT_EQ(loaded->vocab_size(), 72);
  std::string text = "the quick zebra sings";
  EXPECT_EQ(loaded->encode(text), tokenizer->encode(text));
  EXPECT_EQ(tokenizer->decode({0, 0}), "");
  EXPECT_THROW(tokenizer->decode({72}), Error);
}

TEST_P(SentencePiece, PiecesJoinToTheDecodedText) {
  auto tokenizer = train_tokenizer(make_sentences(300, 2), TokenizerOptions{GetParam(), 72});
  for (const std::string& sentence : make_sentences(20, 3)) {
    const std::vector<int> ids = tokenizer->encode(sentence);
    std::string joined;
    for (int id : ids) joined += tokenizer->piece(id);
    // Every word starts with the marker U+2581, which decoding turns into a space.
    ASSERT_TRUE(joined.starts_with("\u2581")) << joined;
    std::string spaced;
    for (size_t i = 0; i < joined.size();) {
      const bool marker = joined.compare(i, 3, "\u2581") == 0;
      spaced += marker ? " " : joined.substr(i, 1);
      i += marker ? 3 : 1;
    }
    EXPECT_EQ(spaced.substr(1), tokenizer->decode(ids));
  }
  EXPECT_EQ(tokenizer->piece(1), "");  // sentencepiece's <unk>
}

TEST_P(SentencePiece, CountsAndDropsUnknownCharacters) {
  auto tokenizer = train_tokenizer(make_sentences(300, 2), TokenizerOptions{GetParam(), 64});
  std::vector<int> ids = tokenizer->encode("the \u00e9\u00e9 dog \u20ac");
  for (int id : ids) EXPECT_GT(id, Tokenizer::kBlank);
  // The unknown characters are gone; the word boundaries around them remain.
  EXPECT_EQ(normalize_text(tokenizer->decode(ids), TextNormalizeOptions{}), "the dog");
  EXPECT_EQ(tokenizer->oov_count(), 3u);
  EXPECT_THAT(tokenizer->oov_report(), testing::HasSubstr("U+00E9 x2 '\u20ac' U+20AC x1"));
}

// A vocabulary larger than the transcripts allow is a usage error that says
// how large it may be, not sentencepiece's "Internal: ./src/...cc(660) [...]".
// The limit it names is one that trains.
TEST_P(SentencePiece, TooLargeVocabularyIsAnError) {
  const std::vector<std::string> sentences = make_sentences(20, 4);
  std::string what;
  try {
    train_tokenizer(sentences, TokenizerOptions{GetParam(), 5000});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    what = e.what();
  }
  EXPECT_THAT(what, testing::StartsWith("a " + std::string(GetParam()) +
                                        " vocabulary of 5000 (blank included) is more than the 20 "
                                        "training transcripts allow: at most "));
  EXPECT_THAT(what, testing::HasSubstr("(lower tokenizer.vocab_size, or use tokenizer.type char)"));
  EXPECT_THAT(what, testing::Not(testing::HasSubstr("Internal")));
  const int most = std::atoi(what.c_str() + what.find("at most ") + 8);
  EXPECT_EQ(train_tokenizer(sentences, TokenizerOptions{GetParam(), most})->vocab_size(), most);
}

INSTANTIATE_TEST_SUITE_P(Models, SentencePiece, testing::Values("bpe", "unigram"));

}  // namespace
}  // namespace mpiasr
