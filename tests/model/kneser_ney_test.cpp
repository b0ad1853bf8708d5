// Modified Kneser-Ney estimation against values worked out by hand from the
// definitions in model/kneser_ney.h (counts read off the tiny corpora below),
// and, on a random corpus, every context's distribution summing to 1 over the
// vocabulary and </s> once the ARPA text is read back (model/ngram_lm.h).
#include "model/kneser_ney.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <sstream>

#include "model/ngram_lm.h"
#include "src/base/error.h"

namespace mpiasr {
namespace {

std::vector<std::vector<std::string>> sentences(const std::vector<std::string>& lines) {
  std::vector<std::vector<std::string>> out;
  for (const std::string& line : lines) {
    std::istringstream words(line);
    out.emplace_back();
    for (std::string word; words >> word;) out.back().push_back(word);
  }
  return out;
}

NgramLm read_back(const KneserNeyModel& model) {
  std::ostringstream arpa;
  model.write_arpa(arpa);
  return NgramLm::parse_arpa(arpa.str(), "estimated.arpa");
}

double prob(const NgramLm& lm, std::vector<std::string> context, const std::string& word) {
  std::vector<int32_t> ids;
  for (const std::string& w : context) ids.push_back(lm.word_id(w));
  return std::pow(10.0, lm.log10_prob(ids, lm.word_id(word)));
}

// Corpus "a b", "a b", "b": sentences <s> a b </s>, <s> a b </s>, <s> b </s>.
// Bigram model (N = 2): bigram counts are raw: <s> a 2, a b 2, b </s> 3, <s> b 1,
// so n1 = 1, n2 = 2, n3 = 1, n4 = 0: discounts fall back to 0.5, 1, 1.5.
// Unigram counts are left-neighbour counts: a {<s>} 1, b {a, <s>} 2, </s> {b} 1;
// n1 = 2, n2 = 1: fallback too. V = {<unk>, </s>, a, b}, |V| = 4.
//   unigrams: S = 4, gamma = (0.5 * 2 + 1 * 1) / 4 = 0.5, uniform share 0.5 / 4 = 0.125
//     p(a) = (1 - 0.5) / 4 + 0.125 = 0.25      p(b) = (2 - 1) / 4 + 0.125 = 0.375
//     p(</s>) = 0.25                           p(<unk>) = 0.125
//   context <s>: S = 3, N1 = 1, N2 = 1, gamma = (0.5 + 1) / 3 = 0.5
//     p(a | <s>) = (2 - 1) / 3 + 0.5 * 0.25 = 11/24   p(b | <s>) = 0.5 / 3 + 0.5 * 0.375 = 17/48
//   context a: S = 2, N2 = 1, gamma = 0.5: p(b | a) = 1/2 + 0.5 * 0.375 = 0.6875
//   context b: S = 3, N3+ = 1, gamma = 0.5: p(</s> | b) = 1.5/3 + 0.5 * 0.25 = 0.625
TEST(KneserNey, BigramModelOfATinyCorpusMatchesHandComputedValues) {
  const KneserNeyModel model = estimate_kneser_ney(sentences({"a b", "a b", "b"}), 2);
  EXPECT_EQ(model.vocabulary, (std::vector<std::string>{"<unk>", "<s>", "</s>", "a", "b"}));
  EXPECT_EQ(model.count_of_counts[0], (std::array<int64_t, 4>{2, 1, 0, 0}));
  EXPECT_EQ(model.count_of_counts[1], (std::array<int64_t, 4>{1, 2, 1, 0}));
  EXPECT_TRUE(model.discount_fallback[0]);
  EXPECT_TRUE(model.discount_fallback[1]);
  const NgramLm lm = read_back(model);
  EXPECT_EQ(lm.ngram_count(1), 5u);  // <unk> <s> </s> a b
  EXPECT_EQ(lm.ngram_count(2), 4u);
  EXPECT_NEAR(prob(lm, {}, "a"), 0.25, 1e-6);
  EXPECT_NEAR(prob(lm, {}, "b"), 0.375, 1e-6);
  EXPECT_NEAR(prob(lm, {}, "</s>"), 0.25, 1e-6);
  EXPECT_NEAR(prob(lm, {}, "<unk>"), 0.125, 1e-6);
  EXPECT_NEAR(prob(lm, {}, "zebra"), 0.125, 1e-6);
  EXPECT_NEAR(prob(lm, {"<s>"}, "a"), 11.0 / 24, 1e-6);
  EXPECT_NEAR(prob(lm, {"<s>"}, "b"), 17.0 / 48, 1e-6);
  EXPECT_NEAR(prob(lm, {"a"}, "b"), 0.6875, 1e-6);
  EXPECT_NEAR(prob(lm, {"b"}, "</s>"), 0.625, 1e-6);
  // Unseen: gamma(h) p(w): p(</s> | <s>) = 0.5 * 0.25, p(a | b) = 0.5 * 0.25.
  EXPECT_NEAR(prob(lm, {"<s>"}, "</s>"), 0.125, 1e-6);
  EXPECT_NEAR(prob(lm, {"b"}, "a"), 0.125, 1e-6);
  // Back-offs are log10 gamma; <s> is never predicted.
  const std::vector<int32_t> a = {lm.word_id("a")};
  EXPECT_NEAR(lm.find(a)->log10_backoff, std::log10(0.5), 1e-6);
  const std::vector<int32_t> s = {lm.sentence_start()};
  EXPECT_FLOAT_EQ(lm.find(s)->log10_prob, -99.0f);
}

// The same corpus as a trigram model: trigrams are raw (<s> a b 2, a b </s> 2,
// <s> b </s> 1); bigrams that start with <s> keep their raw counts (<s> a 2,
// <s> b 1), the others count left neighbours: a b {<s>} 1, b </s> {a, <s>} 2.
//   context a: S = 1, N1 = 1, gamma = 0.5: p(b | a) = 0.5 / 1 + 0.5 * 0.375 = 0.6875
//   context b: S = 2, N2 = 1, gamma = 0.5: p(</s> | b) = 1 / 2 + 0.5 * 0.25 = 0.625
//   context <s> a: S = 2, N2 = 1, gamma 0.5: p(b | <s> a) = 1/2 + 0.5 * 0.6875 = 0.84375
//   context a b:   S = 2, N2 = 1, gamma 0.5: p(</s> | a b) = 1/2 + 0.5 * 0.625 = 0.8125
//   context <s> b: S = 1, N1 = 1, gamma 0.5: p(</s> | <s> b) = 0.5 + 0.5 * 0.625 = 0.8125
TEST(KneserNey, TrigramModelUsesLeftNeighbourCountsBelowTheTopOrder) {
  const KneserNeyModel model = estimate_kneser_ney(sentences({"a b", "a b", "b"}), 3);
  EXPECT_EQ(model.count_of_counts[1],
            (std::array<int64_t, 4>{2, 2, 0, 0}));  // a b, <s> b; <s> a, b </s>
  EXPECT_EQ(model.count_of_counts[2], (std::array<int64_t, 4>{1, 2, 0, 0}));
  const NgramLm lm = read_back(model);
  EXPECT_NEAR(prob(lm, {"a"}, "b"), 0.6875, 1e-6);
  EXPECT_NEAR(prob(lm, {"b"}, "</s>"), 0.625, 1e-6);
  EXPECT_NEAR(prob(lm, {"<s>", "a"}, "b"), 0.84375, 1e-6);
  EXPECT_NEAR(prob(lm, {"a", "b"}, "</s>"), 0.8125, 1e-6);
  EXPECT_NEAR(prob(lm, {"<s>", "b"}, "</s>"), 0.8125, 1e-6);
  // P(<s> a b </s>) = 11/24 * 0.84375 * 0.8125.
  const std::vector<std::string> words = {"a", "b"};
  EXPECT_NEAR(std::pow(10.0, lm.sentence_log10(words)), 11.0 / 24 * 0.84375 * 0.8125, 1e-6);
}

// Corpus "a a a a a b b b b", "c c c d d d", bigram model. Bigram counts:
// <s> a 1, a a 4, a b 1, b b 3, b </s> 1, <s> c 1, c c 2, c d 1, d d 2, d </s> 1,
// so n1 = 6, n2 = 2, n3 = 1, n4 = 1 and
//   Y = 6 / (6 + 4) = 0.6,  D1 = 1 - 2 * 0.6 * 2/6 = 0.6,  D2 = 2 - 3 * 0.6 * 1/2 = 1.1,
//   D3+ = 3 - 4 * 0.6 * 1/1 = 0.6.
// Unigrams: every word and </s> has 2 left neighbours, n2 = 5 only: fallback;
// S = 10, gamma = 5 * 1 / 10 = 0.5, |V| = 6: p(a) = (2 - 1) / 10 + 0.5 / 6.
// Context a: a a 4, a b 1: S = 5, gamma = (0.6 * 1 + 0.6 * 1) / 5 = 0.24,
//   p(a | a) = (4 - 0.6) / 5 + 0.24 p(a),  p(b | a) = (1 - 0.6) / 5 + 0.24 p(b).
TEST(KneserNey, DiscountsComeFromTheCountOfCounts) {
  const KneserNeyModel model =
      estimate_kneser_ney(sentences({"a a a a a b b b b", "c c c d d d"}), 2);
  EXPECT_EQ(model.count_of_counts[1], (std::array<int64_t, 4>{6, 2, 1, 1}));
  EXPECT_FALSE(model.discount_fallback[1]);
  EXPECT_NEAR(model.discounts[1][0], 0.6, 1e-12);
  EXPECT_NEAR(model.discounts[1][1], 1.1, 1e-12);
  EXPECT_NEAR(model.discounts[1][2], 0.6, 1e-12);
  EXPECT_TRUE(model.discount_fallback[0]);
  const NgramLm lm = read_back(model);
  const double p_a = 0.1 + 0.5 / 6, p_b = 0.1 + 0.5 / 6;
  EXPECT_NEAR(prob(lm, {}, "a"), p_a, 1e-6);
  EXPECT_NEAR(prob(lm, {"a"}, "a"), 3.4 / 5 + 0.24 * p_a, 1e-6);
  EXPECT_NEAR(prob(lm, {"a"}, "b"), 0.4 / 5 + 0.24 * p_b, 1e-6);
}

// Every context's probabilities sum to 1 over the vocabulary and </s>: the
// contexts the model lists (an n-gram with a back-off) and unseen ones.
TEST(KneserNey, EveryContextSumsToOne) {
  std::mt19937 rng(11);
  const std::vector<std::string> vocabulary = {"the", "cat", "sat", "on", "a", "mat", "dog", "ran"};
  std::vector<std::vector<std::string>> corpus(300);
  for (auto& sentence : corpus) {
    const int length = 1 + int(rng() % 7);
    for (int i = 0; i < length; ++i) {
      // Skewed choices so that counts of 1 to 4 and more all occur.
      const size_t pick = std::min(rng() % 8, rng() % 8);
      sentence.push_back(vocabulary[pick]);
    }
  }
  for (int order : {1, 2, 3, 4}) {
    const KneserNeyModel model = estimate_kneser_ney(corpus, order);
    if (order >= 2) {
      EXPECT_FALSE(model.discount_fallback[1]) << "order " << order;
    }
    const NgramLm lm = read_back(model);
    std::vector<std::vector<int32_t>> contexts = {{}};
    for (int k = 0; k + 1 < order; ++k) {
      for (const auto& [ngram, entry] : model.ngrams[size_t(k)]) contexts.push_back(ngram);
    }
    contexts.push_back({lm.word_id("mat"), lm.word_id("mat"), lm.word_id("mat")});  // unseen
    for (const std::vector<int32_t>& context : contexts) {
      double sum = 0;
      for (int32_t w = 0; w < int32_t(lm.vocabulary_size()); ++w) {
        if (w != lm.sentence_start()) sum += std::pow(10.0, lm.log10_prob(context, w));
      }
      EXPECT_NEAR(sum, 1.0, 2e-6) << "order " << order << ", a context of " << context.size()
                                  << " words";
    }
  }
}

TEST(KneserNey, SentenceBoundaryWordsAreRejected) {
  try {
    estimate_kneser_ney(sentences({"a b", "a </s> b"}), 2);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
    EXPECT_NE(std::string(e.what()).find("sentence 2"), std::string::npos) << e.what();
  }
  EXPECT_THROW(estimate_kneser_ney(sentences({"", ""}), 2), Error);
}

}  // namespace
}  // namespace mpiasr
