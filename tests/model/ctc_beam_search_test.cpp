// CTC prefix beam search against references computed here:
//   - by brute force: every alignment (frame path) of a small T x V matrix is
//     enumerated, collapsed and its probability added to its labelling's, so
//     the objective of every labelling is known exactly; the language-model
//     term comes from NgramLm::sentence_log10 on words split here;
//   - greedy decoding (ctc_greedy_decode_one).
// On random log-prob matrices: a beam of 1 without a language model is greedy
// decoding; the beam never scores below greedy under its own objective; a
// beam wide enough to keep every prefix finds the best labelling, for
// character and sentencepiece-style tokens, with and without a language model;
// with a lexicon, the same among the labellings whose words are all in it,
// and a narrow beam writes only its words or falls back to greedy decoding.
#include "model/ctc_beam_search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <sstream>

#include "model/ctc_decode.h"
#include "model/kneser_ney.h"
#include "src/base/error.h"

namespace mpiasr {
namespace {

constexpr double kLn10 = 2.302585092994046;

// Random log-softmax rows [T, V]; `peak` sharpens them (larger: more peaked).
std::vector<float> random_logprobs(std::mt19937& rng, int T, int V, double peak) {
  std::normal_distribution<double> normal(0.0, peak);
  std::vector<float> out(size_t(T) * size_t(V));
  for (int t = 0; t < T; ++t) {
    std::vector<double> logits(static_cast<size_t>(V));
    double max = -1e300;
    for (double& z : logits) max = std::max(max, z = normal(rng));
    double sum = 0;
    for (double z : logits) sum += std::exp(z - max);
    for (int v = 0; v < V; ++v)
      out[size_t(t * V + v)] = float(logits[size_t(v)] - max - std::log(sum));
  }
  return out;
}

// ln P_ctc of every labelling with non-zero probability, by enumerating the V^T alignments.
std::map<std::vector<int32_t>, double> all_labellings(const std::vector<float>& lp, int T, int V) {
  std::map<std::vector<int32_t>, double> out;
  std::vector<int> path(size_t(T), 0);
  for (;;) {
    double log_p = 0;
    std::vector<int32_t> labelling;
    int previous = 0;
    for (int t = 0; t < T; ++t) {
      log_p += lp[size_t(t * V + path[size_t(t)])];
      if (path[size_t(t)] != 0 && path[size_t(t)] != previous) labelling.push_back(path[size_t(t)]);
      previous = path[size_t(t)];
    }
    auto [it, inserted] = out.emplace(labelling, log_p);
    if (!inserted) {
      const double hi = std::max(it->second, log_p), lo = std::min(it->second, log_p);
      it->second = hi + std::log1p(std::exp(lo - hi));
    }
    int t = 0;
    while (t < T && ++path[size_t(t)] == V) path[size_t(t++)] = 0;
    if (t == T) break;
  }
  return out;
}

// Word splitting written here from the rules in ctc_beam_search.h.
std::vector<std::string> words_of(const std::vector<CtcToken>& tokens,
                                  const std::vector<int32_t>& labelling) {
  std::string text;
  for (int32_t id : labelling) {
    const CtcToken& token = tokens[size_t(id)];
    text += token.separates_words || token.starts_word ? " " + token.text : token.text;
  }
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string word; in >> word;) words.push_back(word);
  return words;
}

double objective(const std::vector<CtcToken>& tokens, const NgramLm* lm,
                 const BeamSearchOptions& options, const std::vector<int32_t>& labelling,
                 double ctc_log_prob) {
  const std::vector<std::string> words = words_of(tokens, labelling);
  const double lm_term = lm ? options.lm_weight * kLn10 * lm->sentence_log10(words) : 0.0;
  return ctc_log_prob + lm_term + options.word_bonus * double(words.size());
}

// Characters: blank, ' ', a, b.
std::vector<CtcToken> char_tokens() {
  return {CtcToken{}, CtcToken{"", true, false}, CtcToken{"a"}, CtcToken{"b"}};
}

// sentencepiece-style: blank, ▁a, ▁b, a, b.
std::vector<CtcToken> piece_tokens() {
  return {CtcToken{}, CtcToken{"a", false, true}, CtcToken{"b", false, true}, CtcToken{"a"},
          CtcToken{"b"}};
}

NgramLm small_lm() {
  std::vector<std::vector<std::string>> corpus = {{"ab", "a"},      {"ab"},      {"ab"},     {"ab"},
                                                  {"a", "ab", "b"}, {"bb", "a"}, {"ba", "a"}};
  std::ostringstream arpa;
  estimate_kneser_ney(corpus, 2).write_arpa(arpa);
  return NgramLm::parse_arpa(arpa.str(), "small.arpa");
}

TEST(CtcWords, SeparatorsAndWordStartsEndWords) {
  EXPECT_EQ(ctc_words(char_tokens(), {1, 2, 2, 1, 1, 3, 2, 1}),
            (std::vector<std::string>{"aa", "ba"}));
  EXPECT_EQ(ctc_words(piece_tokens(), {3, 1, 4, 2, 2, 3}),
            (std::vector<std::string>{"a", "ab", "b", "ba"}));
  EXPECT_TRUE(ctc_words(char_tokens(), {1, 1}).empty());
}

TEST(CtcBeamSearch, BeamOfOneWithoutLanguageModelIsGreedyDecoding) {
  std::mt19937 rng(3);
  const std::vector<CtcToken> tokens = char_tokens();
  BeamSearchOptions options;
  options.beam = 1;
  const CtcBeamSearch search(tokens, nullptr, options);
  for (int trial = 0; trial < 200; ++trial) {
    const int T = 1 + int(rng() % 40);
    const std::vector<float> lp = random_logprobs(rng, T, 4, trial % 2 ? 1.0 : 3.0);
    EXPECT_EQ(search.decode(lp.data(), T).tokens, ctc_greedy_decode_one(lp.data(), T, 4))
        << "trial " << trial;
  }
}

TEST(CtcBeamSearch, NeverScoresBelowGreedy) {
  std::mt19937 rng(5);
  const NgramLm lm = small_lm();
  for (const bool with_lm : {false, true}) {
    for (const std::vector<CtcToken>& tokens : {char_tokens(), piece_tokens()}) {
      const int V = int(tokens.size());
      BeamSearchOptions options;
      options.beam = 3;
      options.lm_weight = 0.8;
      options.word_bonus = with_lm ? 1.5 : 0.0;
      const CtcBeamSearch search(tokens, with_lm ? &lm : nullptr, options);
      int better = 0;
      for (int trial = 0; trial < 60; ++trial) {
        const int T = 1 + int(rng() % (V == 4 ? 8 : 7));
        const std::vector<float> lp = random_logprobs(rng, T, V, 1.5);
        const std::map<std::vector<int32_t>, double> exact = all_labellings(lp, T, V);
        const std::vector<int32_t> greedy = ctc_greedy_decode_one(lp.data(), T, V);
        const BeamHypothesis best = search.decode(lp.data(), T);
        const double beam_score =
            objective(tokens, with_lm ? &lm : nullptr, options, best.tokens, exact.at(best.tokens));
        const double greedy_score =
            objective(tokens, with_lm ? &lm : nullptr, options, greedy, exact.at(greedy));
        EXPECT_GE(beam_score, greedy_score - 1e-9) << "trial " << trial;
        // The score the search reports is the objective, exactly.
        EXPECT_NEAR(best.score, beam_score, 1e-4) << "trial " << trial;
        EXPECT_NEAR(best.ctc_log_prob, exact.at(best.tokens), 1e-4) << "trial " << trial;
        better += beam_score > greedy_score + 1e-6;
      }
      EXPECT_GT(better, 0) << "the beam should beat greedy on some of these matrices";
    }
  }
}

// A beam that keeps every prefix and tries every token.
BeamSearchOptions wide_beam(bool with_lm) {
  BeamSearchOptions options;
  options.beam = 100000;
  options.token_prune = std::numeric_limits<double>::infinity();
  options.lm_weight = 0.6;
  options.word_bonus = with_lm ? 0.7 : -0.3;
  return options;
}

TEST(CtcBeamSearch, WideBeamFindsTheBestLabellingByBruteForce) {
  std::mt19937 rng(9);
  const NgramLm lm = small_lm();
  for (const bool with_lm : {false, true}) {
    for (const std::vector<CtcToken>& tokens : {char_tokens(), piece_tokens()}) {
      const int V = int(tokens.size());
      const BeamSearchOptions options = wide_beam(with_lm);
      const CtcBeamSearch search(tokens, with_lm ? &lm : nullptr, options);
      for (int trial = 0; trial < 25; ++trial) {
        const int T = 1 + int(rng() % 7);
        const std::vector<float> lp = random_logprobs(rng, T, V, 1.0);
        std::vector<int32_t> best_labelling;
        double best_score = -1e300;
        for (const auto& [labelling, ctc] : all_labellings(lp, T, V)) {
          const double score = objective(tokens, with_lm ? &lm : nullptr, options, labelling, ctc);
          if (score > best_score) {
            best_score = score;
            best_labelling = labelling;
          }
        }
        const BeamHypothesis best = search.decode(lp.data(), T);
        EXPECT_EQ(best.tokens, best_labelling) << "trial " << trial << ", T " << T;
        EXPECT_NEAR(best.score, best_score, 1e-4) << "trial " << trial;
        EXPECT_EQ(best.words, words_of(tokens, best.tokens));
      }
    }
  }
}

bool all_in(const Lexicon& lexicon, const std::vector<std::string>& words) {
  return std::all_of(words.begin(), words.end(),
                     [&](const std::string& w) { return lexicon.contains(w); });
}

TEST(CtcBeamSearch, WideBeamWithLexiconFindsTheBestLexiconLabellingByBruteForce) {
  std::mt19937 rng(13);
  const NgramLm lm = small_lm();
  const Lexicon lexicon = Lexicon::of_words({"ab", "ba", "b", "aab"});
  for (const bool with_lm : {false, true}) {
    for (const std::vector<CtcToken>& tokens : {char_tokens(), piece_tokens()}) {
      const int V = int(tokens.size());
      const BeamSearchOptions options = wide_beam(with_lm);
      const CtcBeamSearch search(tokens, with_lm ? &lm : nullptr, options, &lexicon);
      int differs_from_unconstrained = 0;
      for (int trial = 0; trial < 25; ++trial) {
        const int T = 1 + int(rng() % 7);
        const std::vector<float> lp = random_logprobs(rng, T, V, 1.0);
        std::vector<int32_t> best_labelling, best_any;
        double best_score = -1e300, best_any_score = -1e300;
        for (const auto& [labelling, ctc] : all_labellings(lp, T, V)) {
          const double score = objective(tokens, with_lm ? &lm : nullptr, options, labelling, ctc);
          if (score > best_any_score) {
            best_any_score = score;
            best_any = labelling;
          }
          if (score > best_score && all_in(lexicon, words_of(tokens, labelling))) {
            best_score = score;
            best_labelling = labelling;
          }
        }
        const BeamHypothesis best = search.decode(lp.data(), T);
        EXPECT_EQ(best.tokens, best_labelling) << "trial " << trial << ", T " << T;
        EXPECT_NEAR(best.score, best_score, 1e-4) << "trial " << trial;
        differs_from_unconstrained += best_any != best_labelling;
      }
      EXPECT_GT(differs_from_unconstrained, 0) << "the lexicon should change some choices";
    }
  }
}

TEST(CtcBeamSearch, NarrowBeamWithLexiconWritesItsWordsOrFallsBackToGreedy) {
  std::mt19937 rng(17);
  const Lexicon lexicon = Lexicon::of_words({"ab", "ba", "b", "aab"});
  for (const std::vector<CtcToken>& tokens : {char_tokens(), piece_tokens()}) {
    const int V = int(tokens.size());
    BeamSearchOptions options;
    options.beam = 2;
    const CtcBeamSearch search(tokens, nullptr, options, &lexicon);
    int fallbacks = 0, in_lexicon = 0;
    for (int trial = 0; trial < 300; ++trial) {
      const int T = 1 + int(rng() % 30);
      const std::vector<float> lp = random_logprobs(rng, T, V, 2.0);
      const std::vector<BeamHypothesis> finals = search.search(lp.data(), T);
      const std::vector<int32_t> greedy = ctc_greedy_decode_one(lp.data(), T, V);
      if (all_in(lexicon, finals.front().words)) {
        ++in_lexicon;
        for (const BeamHypothesis& h : finals) EXPECT_TRUE(all_in(lexicon, h.words));
      } else {
        ++fallbacks;
        ASSERT_EQ(finals.size(), 1u) << "trial " << trial;
        EXPECT_EQ(finals.front().tokens, greedy) << "trial " << trial;
      }
    }
    EXPECT_GT(in_lexicon, 0);
    EXPECT_GT(fallbacks, 0) << "a beam of 2 should sometimes end mid-word";
  }
}

TEST(CtcBeamSearch, LanguageModelChangesTheChoice) {
  // Three frames: b or a (b barely ahead), a blank, a or b (a barely ahead).
  // The acoustics rank "ba" first, then "bb" and "aa", then "ab"; the
  // language model prefers the word "ab" to the other three by far.
  const std::vector<CtcToken> tokens = char_tokens();
  const float lo = std::log(0.01f), high = std::log(0.49f);
  const std::vector<float> lp = {lo,
                                 lo,
                                 high - 0.02f,
                                 high + 0.02f,  // blank ' ' a b
                                 std::log(0.97f),
                                 lo,
                                 lo,
                                 lo,  // blank
                                 lo,
                                 lo,
                                 high + 0.02f,
                                 high - 0.02f};  // a ahead of b
  const NgramLm lm = small_lm();
  for (const char* other : {"ba", "bb", "aa"}) {
    ASSERT_GT(lm.sentence_log10(std::vector<std::string>{"ab"}),
              lm.sentence_log10(std::vector<std::string>{other}) + 0.2)
        << other;
  }
  BeamSearchOptions options;
  options.beam = 8;
  options.lm_weight = 1.0;
  EXPECT_EQ(CtcBeamSearch(tokens, nullptr, options).decode(lp.data(), 3).words,
            (std::vector<std::string>{"ba"}));
  EXPECT_EQ(CtcBeamSearch(tokens, &lm, options).decode(lp.data(), 3).words,
            (std::vector<std::string>{"ab"}));
}

TEST(CtcBeamSearch, BatchDecodesEachUtteranceOverItsOwnFrames) {
  std::mt19937 rng(13);
  const int B = 5, T = 30, V = 4;
  std::vector<float> batch = random_logprobs(rng, B * T, V, 2.0);
  const std::vector<int32_t> lengths = {30, 12, 0, 29, 1};
  const CtcBeamSearch search(char_tokens(), nullptr, {});
  const std::vector<BeamHypothesis> best = search.decode_batch(batch.data(), lengths.data(), B, T);
  ASSERT_EQ(best.size(), size_t(B));
  for (int b = 0; b < B; ++b) {
    const float* lp = batch.data() + size_t(b * T * V);
    EXPECT_EQ(best[size_t(b)].tokens, search.decode(lp, lengths[size_t(b)]).tokens) << b;
    EXPECT_NEAR(best[size_t(b)].score, search.decode(lp, lengths[size_t(b)]).score, 1e-9) << b;
  }
  const std::vector<int32_t> too_long = {31, 1, 1, 1, 1};
  EXPECT_THROW(search.decode_batch(batch.data(), too_long.data(), B, T), Error);
}

TEST(CtcBeamSearch, NoFramesGiveTheEmptyLabelling) {
  const CtcBeamSearch search(char_tokens(), nullptr, {});
  const BeamHypothesis h = search.decode(nullptr, 0);
  EXPECT_TRUE(h.tokens.empty());
  EXPECT_EQ(h.ctc_log_prob, 0.0);
}

}  // namespace
}  // namespace mpiasr
