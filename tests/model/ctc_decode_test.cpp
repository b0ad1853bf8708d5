// Greedy CTC decoding on hand-built log-probs: the argmax path is written out
// frame by frame, so the expected tokens follow from collapsing it by hand.
#include "model/ctc_decode.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace mpiasr {
namespace {

// Log-probs [frames, V] whose argmax at frame t is path[t] (0.7 vs 0.3 / (V-1)).
std::vector<float> peaked(const std::vector<int32_t>& path, int V) {
  std::vector<float> lp(path.size() * V, std::log(0.3f / (V - 1)));
  for (size_t t = 0; t < path.size(); ++t) lp[t * V + path[t]] = std::log(0.7f);
  return lp;
}

TEST(CtcGreedyDecode, CollapsesRepeatsAndDropsBlanks) {
  // a a _ a b b _ _ c  ->  a a b c   (the blank separates the two a's)
  const std::vector<float> lp = peaked({1, 1, 0, 1, 2, 2, 0, 0, 3}, 4);
  EXPECT_EQ(ctc_greedy_decode_one(lp.data(), 9, 4), (std::vector<int32_t>{1, 1, 2, 3}));
}

TEST(CtcGreedyDecode, AllBlanksAndNoFramesGiveNothing) {
  const std::vector<float> lp = peaked({0, 0, 0}, 3);
  EXPECT_TRUE(ctc_greedy_decode_one(lp.data(), 3, 3).empty());
  EXPECT_TRUE(ctc_greedy_decode_one(lp.data(), 0, 3).empty());
}

TEST(CtcGreedyDecode, AdjacentDifferentLabelsNeedNoBlank) {
  const std::vector<float> lp = peaked({2, 1, 2, 2, 1}, 3);
  EXPECT_EQ(ctc_greedy_decode_one(lp.data(), 5, 3), (std::vector<int32_t>{2, 1, 2, 1}));
}

TEST(CtcGreedyDecode, TiesGoToTheLowestId) {
  // Frame 0: tokens 1 and 2 tie -> 1; frame 1: blank and 2 tie -> blank.
  const std::vector<float> lp = {-5.0f, -0.5f, -0.5f, -0.5f, -3.0f, -0.5f};
  EXPECT_EQ(ctc_greedy_decode_one(lp.data(), 2, 3), (std::vector<int32_t>{1}));
}

TEST(CtcGreedyDecode, BatchIgnoresPaddingFrames) {
  const int T = 5, V = 4;
  std::vector<float> batch;
  for (const std::vector<int32_t>& path :
       {std::vector<int32_t>{1, 2, 3, 3, 0}, std::vector<int32_t>{3, 0, 3, 1, 2},
        std::vector<int32_t>{2, 2, 2, 2, 2}}) {
    const std::vector<float> lp = peaked(path, V);
    batch.insert(batch.end(), lp.begin(), lp.end());
  }
  const std::vector<int32_t> lengths = {5, 3, 0};  // frames 3.. and 0.. are padding
  const std::vector<std::vector<int32_t>> hyps =
      ctc_greedy_decode(batch.data(), lengths.data(), 3, T, V);
  ASSERT_EQ(hyps.size(), 3u);
  EXPECT_EQ(hyps[0], (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(hyps[1], (std::vector<int32_t>{3, 3}));
  EXPECT_TRUE(hyps[2].empty());
}

TEST(CtcGreedyDecode, RejectsLengthBeyondFrames) {
  const std::vector<float> lp = peaked({1, 2}, 3);
  const int32_t length = 3;
  EXPECT_ANY_THROW(ctc_greedy_decode(lp.data(), &length, 1, 2, 3));
}

TEST(CtcGreedyStream, ARepeatAcrossPiecesIsCollapsedAndABlankBetweenPiecesKept) {
  // a | a _ | a b | b _ c  ->  a a b c: the repeat of a and of b spans two
  // pieces, the blank that separates the a's ends one.
  const std::vector<float> lp = peaked({1, 1, 0, 1, 2, 2, 0, 3}, 4);
  CtcGreedyStream stream;
  for (const auto& [first, count] : {std::pair{0, 1}, {1, 2}, {3, 2}, {5, 0}, {5, 3}}) {
    stream.push(lp.data() + first * 4, count, 4);
  }
  EXPECT_EQ(stream.tokens(), (std::vector<int32_t>{1, 1, 2, 3}));
}

}  // namespace
}  // namespace mpiasr
