// CTC decoding speed on the CPU, utterances per second: the prefix beam
// search (model/ctc_beam_search.h) over one utterance of 100 frames and 32
// characters (blank, space, 30 letters) at beams 1, 4, 16, 64 and 512,
// without and with a 3-gram language model of 2000 words estimated here
// (model/kneser_ney.h), and without and with those words as the lexicon
// (model/lexicon.h). The frames are peaky like a trained model's: a
// character every third frame, blank otherwise, the rest of the mass on a few
// rivals.
// Run: ./ctc_beam_search_bench  (one thread)
#include <benchmark/benchmark.h>

#include <cmath>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "model/ctc_beam_search.h"
#include "model/kneser_ney.h"

namespace {

// Frames that look like a trained model's: mostly blank, a character every
// few frames, the rest of the mass spread over a few rivals.
std::vector<float> peaky_logprobs(int T, int V, std::mt19937& rng) {
  std::vector<float> logprobs(static_cast<size_t>(T) * V);
  std::uniform_int_distribution<int> token(1, V - 1);
  std::uniform_real_distribution<float> share(0.5f, 0.95f);
  for (int t = 0; t < T; ++t) {
    std::vector<double> p(V, 0.0);
    const double top = share(rng);
    p[t % 3 == 0 ? token(rng) : 0] += top;
    for (int k = 0; k < 4; ++k) p[token(rng)] += (1 - top) / 5;
    p[0] += (1 - top) / 5;
    for (int k = 0; k < V; ++k)
      logprobs[static_cast<size_t>(t) * V + k] = float(std::log(p[k] + 1e-6));
  }
  return logprobs;
}

void BM_CtcBeamSearch(benchmark::State& state) {
  const int T = 100, V = 32, beam = static_cast<int>(state.range(0));
  const bool with_lm = state.range(1) != 0, with_lexicon = state.range(2) != 0;
  std::mt19937 rng(1);
  // Tokens: blank, space, 30 letters.
  std::vector<mpiasr::CtcToken> tokens(V);
  tokens[1].separates_words = true;
  for (int k = 2; k < V; ++k)
    tokens[static_cast<size_t>(k)].text = std::string(1, char('a' + k - 2));
  // 2000 random words of 2-6 letters; the 3-gram of them over 20000 sentences.
  std::uniform_int_distribution<int> letter(0, 25), length(2, 6), words(3, 12);
  std::vector<std::string> vocabulary(2000);
  for (std::string& word : vocabulary) {
    for (int i = length(rng); i > 0; --i) word += char('a' + letter(rng));
  }
  std::optional<mpiasr::NgramLm> lm;
  if (with_lm) {
    std::uniform_int_distribution<size_t> pick(0, vocabulary.size() - 1);
    std::vector<std::vector<std::string>> corpus(20000);
    for (auto& sentence : corpus) {
      for (int i = words(rng); i > 0; --i)
        sentence.push_back(vocabulary[std::min(pick(rng), pick(rng))]);
    }
    std::ostringstream arpa;
    mpiasr::estimate_kneser_ney(corpus, 3).write_arpa(arpa);
    lm = mpiasr::NgramLm::parse_arpa(arpa.str(), "bench.arpa");
  }
  mpiasr::BeamSearchOptions options;
  options.beam = beam;
  std::optional<mpiasr::Lexicon> lexicon;
  if (with_lexicon) lexicon = mpiasr::Lexicon::of_words(vocabulary);
  const mpiasr::CtcBeamSearch search(tokens, lm ? &*lm : nullptr, options,
                                     lexicon ? &*lexicon : nullptr);
  const std::vector<float> logprobs = peaky_logprobs(T, V, rng);
  for (auto _ : state) benchmark::DoNotOptimize(search.decode(logprobs.data(), T));
  state.counters["utt/s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CtcBeamSearch)
    ->ArgsProduct({{1, 4, 16, 64, 512}, {0, 1}, {0, 1}})
    ->ArgNames({"beam", "lm", "lexicon"})
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
