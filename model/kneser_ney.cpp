// Interpolated modified Kneser-Ney estimation; see kneser_ney.h.
#include "model/kneser_ney.h"

#include <cmath>
#include <iomanip>
#include <set>

#include "src/base/error.h"

namespace mpiasr {

namespace {

constexpr int32_t kUnknown = 0, kStart = 1, kEnd = 2;
constexpr std::array<double, 3> kFallbackDiscounts = {0.5, 1.0, 1.5};

using Counts = std::map<std::vector<int32_t>, int64_t>;

// The statistics of one context h at one order: S(h) and N1, N2, N3+.
struct ContextStats {
  int64_t total = 0;
  std::array<int64_t, 3> with_count = {0, 0, 0};
};

double discount(const std::array<double, 3>& d, int64_t count) {
  return d[size_t(std::min<int64_t>(count, 3) - 1)];
}

double gamma(const std::array<double, 3>& d, const ContextStats& s) {
  return (d[0] * double(s.with_count[0]) + d[1] * double(s.with_count[1]) +
          d[2] * double(s.with_count[2])) /
         double(s.total);
}

}  // namespace

KneserNeyModel estimate_kneser_ney(const std::vector<std::vector<std::string>>& sentences,
                                   int order) {
  MPIASR_CHECK(order >= 1 && order <= 16, "order " << order);
  KneserNeyModel model;
  model.order = order;

  // Vocabulary: the specials, then the words sorted.
  std::set<std::string> words;
  for (size_t s = 0; s < sentences.size(); ++s) {
    for (const std::string& word : sentences[s]) {
      if (word == "<s>" || word == "</s>") {
        MPIASR_FAIL(ExitCode::kBadInput,
                    "sentence " << s + 1 << " holds '" << word << "', which marks sentence ends");
      }
      MPIASR_CHECK(!word.empty(), "empty word in sentence " << s + 1);
      if (word != "<unk>") words.insert(word);
    }
  }
  if (words.empty()) MPIASR_FAIL(ExitCode::kBadInput, "no words to estimate a language model from");
  model.vocabulary = {"<unk>", "<s>", "</s>"};
  model.vocabulary.insert(model.vocabulary.end(), words.begin(), words.end());
  std::map<std::string, int32_t> ids;
  for (size_t i = 0; i < model.vocabulary.size(); ++i) ids[model.vocabulary[i]] = int32_t(i);

  // Raw counts of every order.
  const size_t N = size_t(order);
  std::vector<Counts> raw(N);
  std::vector<int32_t> sequence;
  for (const std::vector<std::string>& sentence : sentences) {
    sequence.assign(1, kStart);
    for (const std::string& word : sentence) sequence.push_back(ids.at(word));
    sequence.push_back(kEnd);
    for (size_t k = 1; k <= N; ++k) {
      for (size_t i = 0; i + k <= sequence.size(); ++i) {
        ++raw[k - 1]
             [std::vector<int32_t>(sequence.begin() + long(i), sequence.begin() + long(i + k))];
      }
    }
  }

  // Adjusted counts: raw at the highest order and for n-grams starting with
  // <s>, else the number of distinct left neighbours.
  std::vector<Counts> adjusted(N);
  adjusted[N - 1] = raw[N - 1];
  for (size_t k = N - 1; k >= 1; --k) {
    for (const auto& [longer, count] : raw[k]) {
      if (longer[1] != kStart)
        ++adjusted[k - 1][std::vector<int32_t>(longer.begin() + 1, longer.end())];
    }
    for (const auto& [ngram, count] : raw[k - 1]) {
      if (ngram[0] == kStart) adjusted[k - 1][ngram] = count;
    }
  }

  // Discounts per order from the count-of-counts (the <s> unigram is never
  // predicted, so it is not counted).
  model.count_of_counts.assign(N, {0, 0, 0, 0});
  model.discounts.assign(N, kFallbackDiscounts);
  model.discount_fallback.assign(N, true);
  for (size_t k = 0; k < N; ++k) {
    std::array<int64_t, 4>& n = model.count_of_counts[k];
    for (const auto& [ngram, count] : adjusted[k]) {
      if (k == 0 && ngram[0] == kStart) continue;
      if (count <= 4) ++n[size_t(count - 1)];
    }
    if (n[0] == 0 || n[1] == 0 || n[2] == 0 || n[3] == 0) continue;
    const double y = double(n[0]) / double(n[0] + 2 * n[1]);
    const std::array<double, 3> d = {1 - 2 * y * double(n[1]) / double(n[0]),
                                     2 - 3 * y * double(n[2]) / double(n[1]),
                                     3 - 4 * y * double(n[3]) / double(n[2])};
    if (d[0] > 0 && d[0] < 1 && d[1] > 0 && d[1] < 2 && d[2] > 0 && d[2] < 3) {
      model.discounts[k] = d;
      model.discount_fallback[k] = false;
    }
  }

  // Context statistics S(h), N1(h), N2(h), N3+(h) per order.
  std::vector<std::map<std::vector<int32_t>, ContextStats>> contexts(N);
  for (size_t k = 0; k < N; ++k) {
    for (const auto& [ngram, count] : adjusted[k]) {
      if (k == 0 && ngram[0] == kStart) continue;
      ContextStats& s = contexts[k][std::vector<int32_t>(ngram.begin(), ngram.end() - 1)];
      s.total += count;
      ++s.with_count[size_t(std::min<int64_t>(count, 3) - 1)];
    }
  }

  // Probabilities, order by order: each interpolates with the one below.
  std::vector<std::map<std::vector<int32_t>, double>> prob(N);
  const ContextStats& root = contexts[0].at({});
  const double uniform = 1.0 / double(model.vocabulary.size() - 1);  // every word but <s>
  const double root_gamma = gamma(model.discounts[0], root);
  for (int32_t w = 0; w < int32_t(model.vocabulary.size()); ++w) {
    if (w == kStart) continue;
    auto found = adjusted[0].find({w});
    const int64_t count = found == adjusted[0].end() ? 0 : found->second;
    const double seen =
        count > 0 ? (double(count) - discount(model.discounts[0], count)) / double(root.total) : 0;
    prob[0][{w}] = seen + root_gamma * uniform;
  }
  for (size_t k = 1; k < N; ++k) {
    for (const auto& [ngram, count] : adjusted[k]) {
      const std::vector<int32_t> history(ngram.begin(), ngram.end() - 1);
      const ContextStats& s = contexts[k].at(history);
      const double lower = prob[k - 1].at(std::vector<int32_t>(ngram.begin() + 1, ngram.end()));
      prob[k][ngram] = (double(count) - discount(model.discounts[k], count)) / double(s.total) +
                       gamma(model.discounts[k], s) * lower;
    }
  }

  // The ARPA entries.
  model.ngrams.resize(N);
  for (size_t k = 0; k < N; ++k) {
    for (const auto& [ngram, p] : prob[k]) model.ngrams[k][ngram].log10_prob = float(std::log10(p));
    if (k == 0) model.ngrams[0][{kStart}].log10_prob = -99.0f;
    if (k + 1 < N) {
      for (const auto& [history, s] : contexts[k + 1]) {
        model.ngrams[k][history].log10_backoff =
            float(std::log10(gamma(model.discounts[k + 1], s)));
      }
    }
  }
  (void)kUnknown;
  return model;
}

void KneserNeyModel::write_arpa(std::ostream& out) const {
  out << "\\data\\\n";
  for (size_t k = 0; k < ngrams.size(); ++k)
    out << "ngram " << k + 1 << "=" << ngrams[k].size() << "\n";
  out << std::setprecision(9);
  for (size_t k = 0; k < ngrams.size(); ++k) {
    out << "\n\\" << k + 1 << "-grams:\n";
    for (const auto& [ngram, entry] : ngrams[k]) {
      out << entry.log10_prob << '\t';
      for (size_t i = 0; i < ngram.size(); ++i)
        out << (i ? " " : "") << vocabulary[size_t(ngram[i])];
      if (k + 1 < ngrams.size()) out << '\t' << entry.log10_backoff;
      out << '\n';
    }
  }
  out << "\n\\end\\\n";
}

}  // namespace mpiasr
