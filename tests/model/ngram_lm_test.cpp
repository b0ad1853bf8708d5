// The ARPA reader on a hand-written trigram model: every probability below is
// worked out by hand from the file's entries with the back-off rule
//   log10 P(w | h) = log10 p(h w)                  when "h w" is listed
//                  = log10 b(h) + log10 P(w | h')  otherwise (b = 0 when h is not listed).
// And bad files: each error names the file and the line.
#include "model/ngram_lm.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "src/base/error.h"

namespace mpiasr {
namespace {

constexpr const char* kArpa = R"(a comment before \data\ is ignored

\data\
ngram 1=5
ngram  2 = 4
ngram 3=2

\1-grams:
-99	<s>	-0.30103
-0.60206	</s>
-0.69897	a	-0.1
-0.52288	b	-0.2
-1.0	<unk>

\2-grams:
-0.30103	<s> a	-0.05
-0.17609	a b	-0.15
-0.47712 b </s>
-0.39794	b a

\3-grams:
-0.1	<s> a b
-0.2	a b </s>

\end\
)";

class NgramLmTest : public ::testing::Test {
 protected:
  NgramLm lm = NgramLm::parse_arpa(kArpa, "hand.arpa");
  int32_t id(const char* word) const { return lm.word_id(word); }
  double p(std::vector<const char*> context, const char* word) const {
    std::vector<int32_t> ids;
    for (const char* w : context) ids.push_back(id(w));
    return lm.log10_prob(ids, id(word));
  }
};

TEST_F(NgramLmTest, ReadsTheHeaderAndTheEntries) {
  EXPECT_EQ(lm.order(), 3);
  EXPECT_EQ(lm.ngram_count(1), 5u);
  EXPECT_EQ(lm.ngram_count(2), 4u);
  EXPECT_EQ(lm.ngram_count(3), 2u);
  EXPECT_EQ(lm.word(lm.sentence_start()), "<s>");
  EXPECT_EQ(lm.word(lm.sentence_end()), "</s>");
  const std::vector<int32_t> s_a = {id("<s>"), id("a")};
  ASSERT_TRUE(lm.find(s_a).has_value());
  EXPECT_FLOAT_EQ(lm.find(s_a)->log10_prob, -0.30103f);
  EXPECT_FLOAT_EQ(lm.find(s_a)->log10_backoff, -0.05f);
  const std::vector<int32_t> b_a = {id("b"), id("a")};
  EXPECT_FLOAT_EQ(lm.find(b_a)->log10_backoff, 0.0f);  // no back-off field
  const std::vector<int32_t> a_a = {id("a"), id("a")};
  EXPECT_FALSE(lm.find(a_a).has_value());
}

TEST_F(NgramLmTest, ListedNgramsGiveTheirOwnProbability) {
  EXPECT_NEAR(p({"<s>"}, "a"), -0.30103, 1e-6);
  EXPECT_NEAR(p({"<s>", "a"}, "b"), -0.1, 1e-6);
  EXPECT_NEAR(p({"a", "b"}, "</s>"), -0.2, 1e-6);
  EXPECT_NEAR(p({}, "b"), -0.52288, 1e-6);
}

TEST_F(NgramLmTest, UnlistedNgramsBackOff) {
  // "a b a" unlisted: b(a b) + P(a | b) = -0.15 + -0.39794 ("b a" listed).
  EXPECT_NEAR(p({"a", "b"}, "a"), -0.15 - 0.39794, 1e-6);
  // "b a b" unlisted, "b a" has no back-off: 0 + P(b | a) = -0.17609.
  EXPECT_NEAR(p({"b", "a"}, "b"), -0.17609, 1e-6);
  // "<s> a </s>" unlisted: b(<s> a) + ["a </s>" unlisted: b(a) + p(</s>)]
  //   = -0.05 + (-0.1 + -0.60206).
  EXPECT_NEAR(p({"<s>", "a"}, "</s>"), -0.05 - 0.1 - 0.60206, 1e-6);
  // The context "a a" is not listed (no back-off), then "a a" is not either:
  //   0 + b(a) + p(a) = -0.1 + -0.69897.
  EXPECT_NEAR(p({"a", "a"}, "a"), -0.1 - 0.69897, 1e-6);
}

TEST_F(NgramLmTest, UnknownWordsAreUnkAndLongContextsUseTheirLastWords) {
  EXPECT_EQ(lm.word_id("zebra"), lm.word_id("<unk>"));
  // b(a b) + b(b) + p(<unk>) = -0.15 - 0.2 - 1.0.
  EXPECT_NEAR(p({"a", "b"}, "zebra"), -0.15 - 0.2 - 1.0, 1e-6);
  EXPECT_NEAR(p({"<s>", "b", "a", "a", "b"}, "</s>"), -0.2, 1e-6);
}

TEST_F(NgramLmTest, SentenceScoreAddsEveryWordAndTheEnd) {
  // P(a | <s>) + P(b | <s> a) + P(</s> | a b).
  const std::vector<std::string> words = {"a", "b"};
  EXPECT_NEAR(lm.sentence_log10(words), -0.30103 - 0.1 - 0.2, 1e-6);
  std::vector<int32_t> context = lm.start_context();
  EXPECT_NEAR(lm.advance(context, id("a")), -0.30103, 1e-6);
  EXPECT_NEAR(lm.advance(context, id("b")), -0.1, 1e-6);
  EXPECT_EQ(context, (std::vector<int32_t>{id("a"), id("b")}));
  EXPECT_NEAR(lm.advance(context, id("a")), -0.15 - 0.39794, 1e-6);
  EXPECT_EQ(context, (std::vector<int32_t>{id("b"), id("a")}));
}

TEST(NgramLmWithoutUnk, UnknownWordsGetTheMissingUnknownScore) {
  const char* text = "\\data\\\nngram 1=3\n\n\\1-grams:\n-1\t<s>\n-0.5\t</s>\n-0.2\ta\n\n\\end\\\n";
  const NgramLm lm = NgramLm::parse_arpa(text, "nounk.arpa");
  EXPECT_EQ(lm.word_id("b"), NgramLm::kNoWord);
  EXPECT_EQ(lm.log10_prob(lm.start_context(), lm.word_id("b")), NgramLm::kMissingUnknownLog10);
  EXPECT_NEAR(lm.log10_prob(lm.start_context(), lm.word_id("a")), -0.2, 1e-6);
}

// The message of the Error that parsing `text` throws, or "" if none.
std::string parse_error(const std::string& text) {
  try {
    NgramLm::parse_arpa(text, "bad.arpa");
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
    return e.what();
  }
  return "";
}

TEST(NgramLmErrors, BadFilesAreRejected) {
  const std::string head = "\\data\\\nngram 1=3\nngram 2=1\n\n\\1-grams:\n-1\t<s>\n-0.5\t</s>\n";
  const std::string good = head + "-0.2\ta\n\n\\2-grams:\n-0.1\t<s> a\n\n\\end\\\n";
  EXPECT_EQ(parse_error(good), "");
  EXPECT_NE(parse_error(head + "x\ta\n\n\\2-grams:\n-0.1\t<s> a\n\n\\end\\\n")
                .find("bad.arpa:8: probability 'x' is not a number"),
            std::string::npos);
  EXPECT_NE(parse_error(head + "-0.2\ta\n\n\\2-grams:\n-0.1\t<s> zebra\n\n\\end\\\n")
                .find("bad.arpa:11: word 'zebra' is not among the unigrams"),
            std::string::npos);
  EXPECT_NE(parse_error(head + "\n\\2-grams:\n-0.1\t<s> </s>\n\n\\end\\\n")
                .find("bad.arpa:9: the 1-gram section has 2 entries, \\data\\ says 3"),
            std::string::npos);
  EXPECT_NE(parse_error(head + "-0.2\ta\n\n\\2-grams:\n-0.1\t<s> a\n").find("no \\end\\ line"),
            std::string::npos);
  EXPECT_NE(parse_error(head + "-0.2\ta b -1 2\n").find("bad.arpa:8: a 1-gram line needs"),
            std::string::npos);
  EXPECT_NE(parse_error("just text\n").find("no \\data\\ section"), std::string::npos);
}

TEST(NgramLmErrors, MissingFileIsBadInput) {
  try {
    NgramLm::read_arpa("/nonexistent/lm.arpa");
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
    EXPECT_NE(std::string(e.what()).find("/nonexistent/lm.arpa"), std::string::npos);
  }
}

}  // namespace
}  // namespace mpiasr
