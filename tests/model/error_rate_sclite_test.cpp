// mpiasr's word error counts (model/error_rate.h) against NIST's sclite
// (Debian's sctk; scripts/install-deps.sh installs it): the same references
// and hypotheses go to both, as trn files with utterance ids, and every
// utterance's errors (sclite: substitutions + deletions + insertions), its
// reference words, the totals and the WER must be identical. The cases hold
// substitutions, insertions, deletions, empty hypotheses and references, and
// repeated words.
//
// The two alignments differ by design in one rare case: sclite minimizes the
// weighted cost 4 S + 3 D + 3 I, mpiasr (like Kaldi's compute-wer) the number
// of edits S + D + I, and where three substitutions tie with two deletions
// and two insertions sclite can count one error more. The last test pins
// that case down, so a change in either shows.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include "model/error_rate.h"

namespace mpiasr {
namespace {

namespace fs = std::filesystem;

struct Case {
  std::string ref, hyp;
};

struct ScliteScores {
  int64_t correct = 0, substitutions = 0, deletions = 0, insertions = 0;
  int64_t errors() const { return substitutions + deletions + insertions; }
  int64_t words() const { return correct + substitutions + deletions; }
};

std::string run(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return out;
  char buffer[4096];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe)) out.append(buffer, n);
  pclose(pipe);
  return out;
}

// The sclite command: Debian's `sctk sclite`, or the binary itself.
std::string sclite() {
  if (run("command -v sctk").find("sctk") != std::string::npos) return "sctk sclite";
  if (fs::exists("/usr/lib/sctk/bin/sclite")) return "/usr/lib/sctk/bin/sclite";
  return "";
}

// sclite's scores of every utterance, by id, from its per-utterance report.
std::map<std::string, ScliteScores> score_with_sclite(const std::vector<Case>& cases) {
  const fs::path dir = fs::temp_directory_path() / ("mpiasr_sclite_" + std::to_string(getpid()));
  fs::create_directories(dir);
  {
    std::ofstream ref(dir / "ref.trn"), hyp(dir / "hyp.trn");
    for (size_t i = 0; i < cases.size(); ++i) {
      const std::string id = "(spk_u" + std::to_string(1000 + i) + ")";
      ref << cases[i].ref << (cases[i].ref.empty() ? "" : " ") << id << "\n";
      hyp << cases[i].hyp << (cases[i].hyp.empty() ? "" : " ") << id << "\n";
    }
  }
  const std::string report = run(sclite() + " -r " + (dir / "ref.trn").string() + " trn -h " +
                                 (dir / "hyp.trn").string() + " trn -i rm -o pra stdout 2>&1");
  fs::remove_all(dir);
  std::map<std::string, ScliteScores> scores;
  const std::regex entry(R"(id: \((spk_u\d+)\)\nScores: \(#C #S #D #I\) (\d+) (\d+) (\d+) (\d+))");
  for (std::sregex_iterator it(report.begin(), report.end(), entry), end; it != end; ++it) {
    scores[(*it)[1]] = {std::stoll((*it)[2]), std::stoll((*it)[3]), std::stoll((*it)[4]),
                        std::stoll((*it)[5])};
  }
  EXPECT_EQ(scores.size(), cases.size()) << "sclite's report:\n" << report;
  return scores;
}

class ScliteTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(sclite().empty())
        << "sclite not found: install Debian's sctk (bash scripts/install-deps.sh)";
  }
};

TEST_F(ScliteTest, SameErrorsAndWerAsMpiasr) {
  const std::vector<Case> cases = {
      {"the cat sat on the mat", "the cat sat on the mat"},  // correct
      {"the cat sat on the mat", "the bat sat in the hat"},  // substitutions
      {"hello world", "hello big wide world"},               // insertions
      {"a b c d e", "a c e"},                                // deletions
      {"one two three", ""},                                 // empty hypothesis
      {"", "noise"},                                         // empty reference
      {"", ""},                                              // both empty
      {"the the the cat", "the cat cat"},                    // repeated words
      {"go go go go", "go go"},                              // repeated, deleted
      {"no no", "no no no no no"},                           // repeated, inserted
      {"i want to go to the store today", "i wanted go to to the stores today now"},
      {"don't stop me now", "dont stop me know"},  // apostrophes
      {"a b a b a b", "b a b a b a"},              // shifted
      {"speech recognition is hard", "speech wreck a nice beach is hard"},
      {"x", "y z"},
  };
  const std::map<std::string, ScliteScores> sclite_scores = score_with_sclite(cases);
  ErrorCounts total;
  ScliteScores sclite_total;
  for (size_t i = 0; i < cases.size(); ++i) {
    ErrorCounts one;
    one.add(cases[i].ref, cases[i].hyp);
    total.merge(one);
    const auto found = sclite_scores.find("spk_u" + std::to_string(1000 + i));
    ASSERT_NE(found, sclite_scores.end()) << i;
    const ScliteScores& s = found->second;
    EXPECT_EQ(one.word_errors, s.errors()) << "'" << cases[i].ref << "' / '" << cases[i].hyp << "'";
    EXPECT_EQ(one.words, s.words()) << "'" << cases[i].ref << "'";
    sclite_total.correct += s.correct;
    sclite_total.substitutions += s.substitutions;
    sclite_total.deletions += s.deletions;
    sclite_total.insertions += s.insertions;
  }
  EXPECT_EQ(total.word_errors, sclite_total.errors());
  EXPECT_EQ(total.words, sclite_total.words());
  EXPECT_DOUBLE_EQ(total.wer(), double(sclite_total.errors()) / double(sclite_total.words()));
  EXPECT_GT(sclite_total.substitutions, 0);
  EXPECT_GT(sclite_total.deletions, 0);
  EXPECT_GT(sclite_total.insertions, 0);
}

TEST_F(ScliteTest, WeightedAlignmentCanCountOneMoreErrorThanTheEditDistance) {
  // mpiasr: 6 edits, e.g. d d c a a a -> b b b d d with a deletion, 5
  // substitutions; sclite's cheapest weighted alignment has 7 errors.
  const std::vector<Case> cases = {{"d d c a a a", "b b b d d"}};
  ErrorCounts counts;
  counts.add(cases[0].ref, cases[0].hyp);
  EXPECT_EQ(counts.word_errors, 6);
  const ScliteScores s = score_with_sclite(cases).begin()->second;
  EXPECT_EQ(s.errors(), 7);
  const int64_t weighted = 4 * s.substitutions + 3 * (s.deletions + s.insertions);
  EXPECT_LE(weighted, 4 * 5 + 3 * 1);  // no dearer than mpiasr's alignment
}

}  // namespace
}  // namespace mpiasr
