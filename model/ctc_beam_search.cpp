// CTC prefix beam search with a word n-gram language model; see ctc_beam_search.h.
#include "model/ctc_beam_search.h"

#include <algorithm>
#include <cmath>
#include <exception>
#include <unordered_map>

#include "kernels/cpu/ctc_loss.h"
#include "kernels/ctc_math.h"
#include "model/ctc_decode.h"
#include "src/base/error.h"

namespace mpiasr {

namespace {

constexpr double kLn10 = 2.302585092994046;
constexpr double kLogZero = -std::numeric_limits<double>::infinity();

// A prefix (labelling) in the search's trie, with its word state: the word in
// progress and what the words completed before it scored.
struct Node {
  int32_t parent = -1;
  int32_t last = 0;  // the last token; 0 for the empty prefix
  std::string word;
  std::vector<int32_t> context;  // language-model context after the completed words
  double lm_log10 = 0;           // sum of log10 P(word | context) over the completed words
  int32_t words = 0;             // completed words
  // The same after `word` is completed too (computed when first needed).
  bool finished = false;
  std::vector<int32_t> finished_context;
  double finished_lm_log10 = 0;
  int32_t finished_words = 0;
};

// log P of a prefix's alignments ending in a blank / a non-blank: sums and maxima.
struct PathScores {
  double p_blank = kLogZero, p_label = kLogZero;
  double v_blank = kLogZero, v_label = kLogZero;
};

struct Candidate {
  PathScores scores;
  int32_t node = -1;               // the prefix's node when it has one
  int32_t parent = -1, token = 0;  // else it is parent's prefix + token
  double rank = 0;
  uint64_t key = 0;
};

constexpr uint64_t kNewPrefix = uint64_t(1) << 63;

class Search {
 public:
  Search(const std::vector<CtcToken>& tokens, const NgramLm* lm, const BeamSearchOptions& options,
         const Lexicon* lexicon)
      : tokens_(tokens), lm_(lm), options_(options), lexicon_(lexicon) {
    nodes_.emplace_back();
    if (lm_) nodes_[0].context = lm_->start_context();
  }

  std::vector<BeamHypothesis> run(const float* logprobs, int frames) {
    const int V = int(tokens_.size());
    std::vector<std::pair<int32_t, PathScores>> beam = {
        {0, PathScores{0.0, kLogZero, 0.0, kLogZero}}};
    std::unordered_map<uint64_t, Candidate> candidates;
    std::vector<Candidate*> ranked;
    for (int t = 0; t < frames; ++t) {
      const float* y = logprobs + size_t(t) * size_t(V);
      const float best = *std::max_element(y, y + V);
      candidates.clear();
      for (const auto& [node, s] : beam) {
        const double p_total = log_add(s.p_blank, s.p_label);
        const double v_total = std::max(s.v_blank, s.v_label);
        // Stay on the same prefix: a blank, or the last token repeated.
        Candidate& stay = candidate_of(candidates, node);
        stay.scores.p_blank = log_add(stay.scores.p_blank, p_total + y[0]);
        stay.scores.v_blank = std::max(stay.scores.v_blank, v_total + y[0]);
        const int32_t last = nodes_[size_t(node)].last;
        if (last != 0) {
          stay.scores.p_label = log_add(stay.scores.p_label, s.p_label + y[last]);
          stay.scores.v_label = std::max(stay.scores.v_label, s.v_label + y[last]);
        }
        // Extend with a new token.
        for (int32_t c = 1; c < V; ++c) {
          if (y[c] < best - options_.token_prune || !lexicon_allows(node, c)) continue;
          Candidate& next = extension_of(candidates, node, c);
          const bool repeat = c == last;
          next.scores.p_label = log_add(next.scores.p_label, (repeat ? s.p_blank : p_total) + y[c]);
          next.scores.v_label =
              std::max(next.scores.v_label, (repeat ? s.v_blank : v_total) + y[c]);
        }
      }
      ranked.clear();
      for (auto& [key, candidate] : candidates) {
        candidate.key = key;
        candidate.rank = std::max(candidate.scores.v_blank, candidate.scores.v_label) +
                         lm_score(candidate_lm_log10(candidate), candidate_words(candidate));
        ranked.push_back(&candidate);
      }
      const size_t keep = std::min(ranked.size(), size_t(options_.beam));
      std::partial_sort(ranked.begin(), ranked.begin() + long(keep), ranked.end(),
                        [](const Candidate* a, const Candidate* b) {
                          return a->rank != b->rank ? a->rank > b->rank : a->key < b->key;
                        });
      beam.clear();
      for (size_t i = 0; i < keep; ++i) {
        const Candidate& c = *ranked[i];
        const int32_t node = c.node >= 0 ? c.node : child(c.parent, c.token);
        beam.emplace_back(node, c.scores);
      }
    }

    // Final candidates: the beam and the greedy labelling, each once, as the lexicon allows.
    std::vector<int32_t> finals;
    for (const auto& [node, s] : beam) {
      if (ends_whole_word(node)) finals.push_back(node);
    }
    int32_t greedy = 0;
    bool greedy_in_lexicon = true;
    for (int32_t token : ctc_greedy_decode_one(logprobs, frames, V)) {
      greedy_in_lexicon = greedy_in_lexicon && lexicon_allows(greedy, token);
      greedy = child(greedy, token);
    }
    greedy_in_lexicon = greedy_in_lexicon && ends_whole_word(greedy);
    if ((greedy_in_lexicon || finals.empty()) &&
        std::find(finals.begin(), finals.end(), greedy) == finals.end()) {
      finals.push_back(greedy);
    }

    std::vector<BeamHypothesis> hypotheses;
    for (int32_t node : finals) hypotheses.push_back(finish(node, logprobs, frames));
    std::stable_sort(
        hypotheses.begin(), hypotheses.end(),
        [](const BeamHypothesis& a, const BeamHypothesis& b) { return a.score > b.score; });
    return hypotheses;
  }

 private:
  double lm_score(double lm_log10, int32_t words) const {
    return (lm_ ? options_.lm_weight * kLn10 * lm_log10 : 0.0) + options_.word_bonus * words;
  }

  bool ends_word(int32_t token) const {
    return tokens_[size_t(token)].separates_words || tokens_[size_t(token)].starts_word;
  }

  // Whether the lexicon (if any) lets the node's prefix go on with the token.
  bool lexicon_allows(int32_t node, int32_t token) const {
    if (!lexicon_) return true;
    const std::string& word = nodes_[size_t(node)].word;
    const CtcToken& piece = tokens_[size_t(token)];
    if (!ends_word(token)) return lexicon_->begins_word(word + piece.text);
    return ends_whole_word(node) && lexicon_->begins_word(piece.text);
  }

  // Whether the node's word in progress is empty or a whole word of the lexicon (if any).
  bool ends_whole_word(int32_t node) const {
    const std::string& word = nodes_[size_t(node)].word;
    return !lexicon_ || word.empty() || lexicon_->contains(word);
  }

  // Completes the node's word in progress (once) and returns the node.
  const Node& finished(int32_t id) {
    Node& node = nodes_[size_t(id)];
    if (!node.finished) {
      node.finished = true;
      node.finished_context = node.context;
      node.finished_lm_log10 = node.lm_log10;
      node.finished_words = node.words;
      if (!node.word.empty()) {
        ++node.finished_words;
        if (lm_)
          node.finished_lm_log10 += lm_->advance(node.finished_context, lm_->word_id(node.word));
      }
    }
    return node;
  }

  double candidate_lm_log10(const Candidate& c) {
    if (c.node >= 0) return nodes_[size_t(c.node)].lm_log10;
    return ends_word(c.token) ? finished(c.parent).finished_lm_log10
                              : nodes_[size_t(c.parent)].lm_log10;
  }
  int32_t candidate_words(const Candidate& c) {
    if (c.node >= 0) return nodes_[size_t(c.node)].words;
    return ends_word(c.token) ? finished(c.parent).finished_words : nodes_[size_t(c.parent)].words;
  }

  Candidate& candidate_of(std::unordered_map<uint64_t, Candidate>& candidates, int32_t node) {
    Candidate& c = candidates[uint64_t(node)];
    c.node = node;
    return c;
  }

  Candidate& extension_of(std::unordered_map<uint64_t, Candidate>& candidates, int32_t parent,
                          int32_t token) {
    auto existing = children_.find(child_key(parent, token));
    if (existing != children_.end()) return candidate_of(candidates, existing->second);
    Candidate& c = candidates[kNewPrefix | child_key(parent, token)];
    c.parent = parent;
    c.token = token;
    return c;
  }

  static uint64_t child_key(int32_t parent, int32_t token) {
    return (uint64_t(uint32_t(parent)) << 32) | uint32_t(token);
  }

  // The node of parent's prefix + token, made when first needed.
  int32_t child(int32_t parent, int32_t token) {
    auto [it, inserted] = children_.try_emplace(child_key(parent, token), int32_t(nodes_.size()));
    if (!inserted) return it->second;
    const CtcToken& piece = tokens_[size_t(token)];
    Node node;
    node.parent = parent;
    node.last = token;
    if (ends_word(token)) {
      const Node& from = finished(parent);
      node.context = from.finished_context;
      node.lm_log10 = from.finished_lm_log10;
      node.words = from.finished_words;
      if (piece.starts_word) node.word = piece.text;
    } else {
      const Node& from = nodes_[size_t(parent)];
      node.context = from.context;
      node.lm_log10 = from.lm_log10;
      node.words = from.words;
      node.word = from.word + piece.text;
    }
    nodes_.push_back(std::move(node));
    return it->second;
  }

  // The exact objective of a node's labelling over all frames.
  BeamHypothesis finish(int32_t id, const float* logprobs, int frames) {
    BeamHypothesis h;
    for (int32_t n = id; n > 0; n = nodes_[size_t(n)].parent)
      h.tokens.push_back(nodes_[size_t(n)].last);
    std::reverse(h.tokens.begin(), h.tokens.end());
    h.words = ctc_words(tokens_, h.tokens);
    const Node& node = finished(id);
    h.lm_log10 = node.finished_lm_log10;
    if (lm_) {
      std::vector<int32_t> context = node.finished_context;
      h.lm_log10 += lm_->advance(context, lm_->sentence_end());
    }
    double loss = 0;
    const int32_t length = int32_t(h.tokens.size());
    cpu_ctc_loss<float>(&loss, nullptr, logprobs, h.tokens.data(), &length, &frames, nullptr, 1,
                        frames, int(tokens_.size()));
    h.ctc_log_prob = -loss;
    h.score = h.ctc_log_prob + lm_score(h.lm_log10, node.finished_words);
    return h;
  }

  const std::vector<CtcToken>& tokens_;
  const NgramLm* lm_;
  const BeamSearchOptions& options_;
  const Lexicon* lexicon_;
  std::vector<Node> nodes_;
  std::unordered_map<uint64_t, int32_t> children_;  // child_key -> node
};

}  // namespace

std::vector<std::string> ctc_words(const std::vector<CtcToken>& tokens,
                                   const std::vector<int32_t>& labelling) {
  std::vector<std::string> words;
  std::string word;
  for (int32_t id : labelling) {
    const CtcToken& token = tokens[size_t(id)];
    if (token.separates_words || token.starts_word) {
      if (!word.empty()) words.push_back(std::move(word));
      word = token.text;
    } else {
      word += token.text;
    }
  }
  if (!word.empty()) words.push_back(std::move(word));
  return words;
}

CtcBeamSearch::CtcBeamSearch(std::vector<CtcToken> tokens, const NgramLm* lm,
                             BeamSearchOptions options, const Lexicon* lexicon)
    : tokens_(std::move(tokens)), lm_(lm), options_(options), lexicon_(lexicon) {
  if (options_.beam < 1)
    MPIASR_FAIL(ExitCode::kUsage, "beam width " << options_.beam << " must be >= 1");
  if (!(options_.token_prune > 0)) {
    MPIASR_FAIL(ExitCode::kUsage,
                "token pruning threshold " << options_.token_prune << " must be positive");
  }
  MPIASR_CHECK(tokens_.size() >= 2, "beam search over " << tokens_.size() << " tokens");
}

std::vector<BeamHypothesis> CtcBeamSearch::search(const float* logprobs, int frames) const {
  MPIASR_CHECK(frames >= 0, "beam search over " << frames << " frames");
  return Search(tokens_, lm_, options_, lexicon_).run(logprobs, frames);
}

BeamHypothesis CtcBeamSearch::decode(const float* logprobs, int frames) const {
  return search(logprobs, frames).front();
}

std::vector<BeamHypothesis> CtcBeamSearch::decode_batch(const float* logprobs,
                                                        const int32_t* lengths, int B,
                                                        int T) const {
  for (int b = 0; b < B; ++b) {
    MPIASR_CHECK(lengths[b] >= 0 && lengths[b] <= T, "beam search: utterance "
                                                         << b << " has length " << lengths[b]
                                                         << ", outside [0, " << T << "]");
  }
  const size_t V = tokens_.size();
  std::vector<BeamHypothesis> best(size_t(std::max(B, 0)));
  std::vector<std::exception_ptr> errors(best.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (int b = 0; b < B; ++b) {
    try {
      best[size_t(b)] = decode(logprobs + size_t(b) * size_t(T) * V, lengths[b]);
    } catch (...) {
      errors[size_t(b)] = std::current_exception();
    }
  }
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  return best;
}

}  // namespace mpiasr
