// Edit distance against the recursive definition, and CER/WER on pairs whose
// errors are counted by hand.
#include "model/error_rate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "src/base/error.h"

namespace mpiasr {
namespace {

// lev(a, b) = |b| if a empty; |a| if b empty; lev(a', b') if heads equal;
// else 1 + min(lev(a', b), lev(a, b'), lev(a', b')).  Exponential; short inputs.
int64_t lev(const std::vector<int32_t>& a, size_t i, const std::vector<int32_t>& b, size_t j) {
  if (i == a.size()) return static_cast<int64_t>(b.size() - j);
  if (j == b.size()) return static_cast<int64_t>(a.size() - i);
  if (a[i] == b[j]) return lev(a, i + 1, b, j + 1);
  return 1 + std::min({lev(a, i + 1, b, j), lev(a, i, b, j + 1), lev(a, i + 1, b, j + 1)});
}

TEST(EditDistance, MatchesRecursiveDefinition) {
  std::mt19937 rng(11);
  std::uniform_int_distribution<int> length(0, 7), token(1, 3);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<int32_t> a(length(rng)), b(length(rng));
    for (int32_t& x : a) x = token(rng);
    for (int32_t& x : b) x = token(rng);
    EXPECT_EQ(edit_distance(a, b), lev(a, 0, b, 0)) << "trial " << trial;
  }
}

TEST(EditDistance, KnownCases) {
  auto chars = [](const char* s) { return utf8_characters(s); };
  EXPECT_EQ(edit_distance(chars("kitten"), chars("sitting")), 3);
  EXPECT_EQ(edit_distance(chars("flaw"), chars("lawn")), 2);
  EXPECT_EQ(edit_distance(chars(""), chars("abc")), 3);
  EXPECT_EQ(edit_distance(chars("abc"), chars("")), 3);
  EXPECT_EQ(edit_distance(chars("same"), chars("same")), 0);
}

TEST(Utf8Characters, DecodesCodePointsAndCollapsesWhitespace) {
  EXPECT_EQ(utf8_characters("na\xC3\xAFve"), (std::vector<char32_t>{U'n', U'a', 0xEF, U'v', U'e'}));
  EXPECT_EQ(utf8_characters("\xE2\x82\xAC\xF0\x9F\x98\x80"),
            (std::vector<char32_t>{0x20AC, 0x1F600}));
  EXPECT_EQ(utf8_characters("  a \t\n b  "), (std::vector<char32_t>{U'a', U' ', U'b'}));
}

TEST(Utf8Characters, InvalidBytesThrowNamingTheOffset) {
  try {
    utf8_characters("ab\xFF");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
    EXPECT_NE(std::string(e.what()).find("0xff at offset 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(utf8_characters("a\xC3"), Error);  // cut off
  EXPECT_THROW(utf8_characters("\xC3"
                               "a"),
               Error);                           // missing continuation byte
  EXPECT_THROW(utf8_characters("\x80"), Error);  // stray continuation byte
}

TEST(SplitWords, SplitsOnWhitespaceRuns) {
  EXPECT_EQ(split_words("  the\tcat \n sat "), (std::vector<std::string>{"the", "cat", "sat"}));
  EXPECT_TRUE(split_words(" \t ").empty());
}

TEST(ErrorCounts, TheCatTheHat) {
  // "the cat" -> "the hat": one substituted character of 7 (space counts),
  // one substituted word of 2.
  ErrorCounts counts;
  counts.add("the cat", "the hat");
  EXPECT_EQ(counts.char_errors, 1);
  EXPECT_EQ(counts.chars, 7);
  EXPECT_EQ(counts.word_errors, 1);
  EXPECT_EQ(counts.words, 2);
  EXPECT_DOUBLE_EQ(counts.cer(), 1.0 / 7.0);
  EXPECT_DOUBLE_EQ(counts.wer(), 1.0 / 2.0);
}

TEST(ErrorCounts, InsertionsDeletionsAndSums) {
  ErrorCounts counts;
  // Words: "a b c d" -> "a x c d e": 1 substitution + 1 insertion = 2 of 4.
  // Characters (7 ref): "a b c d" -> "a x c d e": 1 sub + 2 ins (" e") = 3.
  counts.add("a b c d", "a x c d e");
  // Empty hypothesis: every reference unit deleted, 5 chars, 2 words.
  counts.add("hi yo", "");
  EXPECT_EQ(counts.word_errors, 2 + 2);
  EXPECT_EQ(counts.words, 4 + 2);
  EXPECT_EQ(counts.char_errors, 3 + 5);
  EXPECT_EQ(counts.chars, 7 + 5);
  EXPECT_DOUBLE_EQ(counts.wer(), 4.0 / 6.0);
  EXPECT_DOUBLE_EQ(counts.cer(), 8.0 / 12.0);
}

TEST(ErrorCounts, MergeEqualsAddingEverythingInOnePlace) {
  const std::vector<std::pair<std::string, std::string>> pairs = {{"the cat sat", "the cat sad"},
                                                                  {"on the mat", "on mat"},
                                                                  {"caf\xC3\xA9", "cafe"},
                                                                  {"a", "a b c"}};
  ErrorCounts all, first, second;
  for (size_t i = 0; i < pairs.size(); ++i) {
    all.add(pairs[i].first, pairs[i].second);
    (i % 2 ? second : first).add(pairs[i].first, pairs[i].second);
  }
  first.merge(second);
  EXPECT_EQ(first.char_errors, all.char_errors);
  EXPECT_EQ(first.chars, all.chars);
  EXPECT_EQ(first.word_errors, all.word_errors);
  EXPECT_EQ(first.words, all.words);
}

TEST(ErrorCounts, EmptyReference) {
  ErrorCounts counts;
  EXPECT_EQ(counts.cer(), 0.0);
  EXPECT_EQ(counts.wer(), 0.0);
  counts.add("", "extra");
  EXPECT_TRUE(std::isinf(counts.cer()));
  EXPECT_TRUE(std::isinf(counts.wer()));
}

}  // namespace
}  // namespace mpiasr
