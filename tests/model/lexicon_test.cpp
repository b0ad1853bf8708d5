// The decoding lexicon against a brute-force reference: for every string of
// up to three letters over {a, b, c}, contains() and begins_word() are
// compared with a linear scan of the word list it was made from (random
// lists, duplicates included). And its file: blank lines and CRLF endings
// skipped, duplicates counted once; a bad file's error names the file and,
// for a line that is not one word, the line.
#include "model/lexicon.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <random>

#include "src/base/error.h"
#include "tests/base/temp_dir.h"

namespace mpiasr {
namespace {

std::vector<std::string> strings_up_to_three_letters() {
  std::vector<std::string> out = {""};
  for (size_t begin = 0, length = 0; length < 3; ++length) {
    const size_t end = out.size();
    for (size_t i = begin; i < end; ++i) {
      for (char c : {'a', 'b', 'c'}) out.push_back(out[i] + c);
    }
    begin = end;
  }
  return out;  // 1 + 3 + 9 + 27
}

TEST(Lexicon, AgreesWithALinearScanOfItsWords) {
  std::mt19937 rng(11);
  const std::vector<std::string> strings = strings_up_to_three_letters();
  ASSERT_EQ(strings.size(), 40u);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<std::string> words;
    const int count = 1 + int(rng() % 12);
    for (int i = 0; i < count; ++i) words.push_back(strings[1 + rng() % (strings.size() - 1)]);
    const Lexicon lexicon = Lexicon::of_words(words);
    std::vector<std::string> distinct = words;
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    EXPECT_EQ(lexicon.size(), distinct.size());
    for (const std::string& s : strings) {
      const bool whole = std::find(words.begin(), words.end(), s) != words.end();
      const bool begins = std::any_of(words.begin(), words.end(),
                                      [&](const std::string& w) { return w.starts_with(s); });
      EXPECT_EQ(lexicon.contains(s), whole) << "trial " << trial << ", '" << s << "'";
      EXPECT_EQ(lexicon.begins_word(s), begins) << "trial " << trial << ", '" << s << "'";
    }
  }
}

std::string read_error(const std::string& path) {
  try {
    Lexicon::read(path);
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
    return e.what();
  }
  return "";
}

TEST(Lexicon, ReadsAWordList) {
  TempDir dir;
  const std::string path = dir.file("words.txt");
  std::ofstream(path) << "there's\r\n\nsin\nsin\nthing\n";
  const Lexicon lexicon = Lexicon::read(path);
  EXPECT_EQ(lexicon.size(), 3u);
  EXPECT_TRUE(lexicon.contains("there's"));
  EXPECT_TRUE(lexicon.contains("sin"));
  EXPECT_FALSE(lexicon.contains("si"));
  EXPECT_TRUE(lexicon.begins_word("th"));
  EXPECT_FALSE(lexicon.begins_word("sins"));
}

TEST(Lexicon, BadFilesNameTheFileAndTheLine) {
  TempDir dir;
  const std::string spaced = dir.file("spaced.txt");
  std::ofstream(spaced) << "one\ntwo words\n";
  EXPECT_NE(read_error(spaced).find(spaced + ":2: 'two words' is not one word"), std::string::npos)
      << read_error(spaced);
  const std::string empty = dir.file("empty.txt");
  std::ofstream(empty) << "\n\n";
  EXPECT_NE(read_error(empty).find(empty + "': no words"), std::string::npos);
  EXPECT_NE(read_error(dir.file("missing.txt")).find("missing.txt': cannot open"),
            std::string::npos);
  EXPECT_THROW(Lexicon::of_words({"a", ""}), Error);
}

}  // namespace
}  // namespace mpiasr
