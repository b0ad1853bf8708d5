// The importers on tiny corpora built here in each toolkit's layout, with
// audio written by libsndfile (FLAC, WAV, MP3) of known lengths, and
// deliberate faults whose drop reasons the report must give with file:line.
// Each import is written as a manifest and read back.
#include "io/corpus_import.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "io/audio.h"
#include "src/base/error.h"

namespace mpiasr {
namespace {

namespace fs = std::filesystem;

class ImportTest : public ::testing::Test {
 protected:
  ImportTest()
      : root_(fs::temp_directory_path() /
              ("mpiasr_import_test_" + std::to_string(getpid()) + "_" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  ~ImportTest() override { fs::remove_all(root_); }

  std::string path(const std::string& name) const { return (root_ / name).string(); }

  // A tone of `seconds` at 16 kHz.
  void audio(const std::string& name, double seconds) const {
    fs::create_directories(fs::path(path(name)).parent_path());
    std::vector<float> samples(size_t(std::llround(seconds * 16000)));
    for (size_t t = 0; t < samples.size(); ++t)
      samples[t] = 0.3f * float(std::sin(0.05 * double(t)));
    write_audio(path(name), samples, 1, 16000);
  }
  void text(const std::string& name, const std::string& contents) const {
    fs::create_directories(fs::path(path(name)).parent_path());
    std::ofstream(path(name), std::ios::binary) << contents;
  }

  // The reasons the report gives, "file:line: what" with the root removed.
  static std::vector<std::string> reasons(const ImportReport& report, const fs::path& root) {
    std::vector<std::string> out;
    for (const InputProblem& problem : report.dropped) {
      std::string line = to_string(problem);
      const std::string prefix = root.string() + "/";
      for (size_t at; (at = line.find(prefix)) != std::string::npos;) line.erase(at, prefix.size());
      out.push_back(line);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

  fs::path root_;
};

bool contains(const std::vector<std::string>& lines, const std::string& start) {
  return std::any_of(lines.begin(), lines.end(),
                     [&](const std::string& line) { return line.starts_with(start); });
}

TEST_F(ImportTest, LibriSpeech) {
  const std::string ls = "LibriSpeech/dev-clean";
  text(ls + "/19/198/19-198.trans.txt",
       "19-198-0001 GOOD DAY\n"
       "19-198-0000 HELLO WORLD\n"
       "19-198-0002 THIS ONE HAS NO AUDIO\n"
       "malformed\n"
       "19-198-0000 SAID AGAIN\n");
  audio(ls + "/19/198/19-198-0000.flac", 1.0);
  audio(ls + "/19/198/19-198-0001.flac", 0.5);
  audio(ls + "/19/198/19-198-0009.flac", 0.25);  // no transcript line
  text(ls + "/26/495/26-495.trans.txt", "26-495-0000 A CORRUPT FILE\n26-495-0001 FINE\n");
  text(ls + "/26/495/26-495-0000.flac", "not audio at all");
  audio(ls + "/26/495/26-495-0001.flac", 0.75);

  const ImportReport report = import_librispeech(path(ls));
  ASSERT_EQ(report.utterances.size(), 3u);
  EXPECT_EQ(report.entries, 8u);
  EXPECT_NEAR(report.seconds, 2.25, 1e-9);
  const std::vector<std::string> ids = {"19-198-0000", "19-198-0001", "26-495-0001"};
  const std::vector<double> seconds = {1.0, 0.5, 0.75};
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(report.utterances[i].id, ids[i]);
    EXPECT_NEAR(report.utterances[i].duration, seconds[i], 1e-9);
    EXPECT_EQ(report.utterances[i].audio_path, path(ls + "/" + ids[i].substr(0, 2) + "/" +
                                                    ids[i].substr(3, 3) + "/" + ids[i] + ".flac"));
  }
  EXPECT_EQ(report.utterances[0].transcript, "HELLO WORLD");
  EXPECT_EQ(report.utterances[0].line, 2);  // its line in the transcript file
  const std::vector<std::string> why = reasons(report, root_);
  ASSERT_EQ(why.size(), 5u) << report.summary();
  EXPECT_TRUE(contains(why, ls + "/19/198/19-198-0009.flac: no transcript")) << report.summary();
  EXPECT_TRUE(contains(why, ls + "/19/198/19-198.trans.txt:3: audio file '")) << report.summary();
  EXPECT_TRUE(contains(why, ls + "/19/198/19-198.trans.txt:4: expected '<id> <TRANSCRIPT>'"))
      << report.summary();
  EXPECT_TRUE(contains(why, ls + "/19/198/19-198.trans.txt:5: utterance 19-198-0000 appears again"))
      << report.summary();
  EXPECT_TRUE(contains(why, ls + "/26/495/26-495.trans.txt:1: audio file '")) << report.summary();
  EXPECT_NE(report.summary().find("kept 3 of 8 entries (0.00 h of audio), dropped 5:"),
            std::string::npos)
      << report.summary();

  // Written and read back.
  write_manifest(path("ls.jsonl"), report.utterances);
  const Manifest manifest = read_manifest(path("ls.jsonl"));
  ASSERT_EQ(manifest.utterances.size(), 3u);
  EXPECT_EQ(manifest.utterances[2].id, "26-495-0001");
  EXPECT_EQ(manifest.utterances[2].transcript, "FINE");
  EXPECT_NEAR(manifest.utterances[2].duration, 0.75, 1e-9);

  EXPECT_THROW(import_librispeech(path("nowhere")), Error);
  fs::create_directories(path("empty"));
  EXPECT_THROW(import_librispeech(path("empty")), Error);
}

TEST_F(ImportTest, CommonVoice) {
  const std::string header =
      "client_id\tpath\tsentence\tup_votes\tdown_votes\tage\tgender\taccents\tlocale\tsegment\n";
  text("cv/en/train.tsv", header +
                              "c1\tclip_1.mp3\tHello there, world!\t2\t0\t\t\t\ten\t\n"
                              "c2\tclip_2.mp3\tSecond sentence.\t2\t0\t\t\t\ten\t\n"
                              "c3\tclip_3.mp3\tIts clip is missing.\t2\t0\t\t\t\ten\t\n"
                              "c4\tclip_4.mp3\t...\t2\t0\t\t\t\ten\t\n"
                              "c5\tclip_5.mp3\ttoo few fields\n");
  const bool mpeg = libsndfile_reads_mpeg();
  if (!mpeg) {
    // Without MPEG support the import stops and says why.
    text("cv/en/clips/clip_1.mp3", "x");
    try {
      import_common_voice(path("cv/en/train.tsv"));
      FAIL() << "imported MP3 without MPEG support";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("without MPEG support"), std::string::npos) << e.what();
    }
    GTEST_SKIP() << "this libsndfile cannot read MP3; checked the message it gives instead";
  }
  audio("cv/en/clips/clip_1.mp3", 1.5);
  audio("cv/en/clips/clip_2.mp3", 0.8);
  audio("cv/en/clips/clip_4.mp3", 0.8);
  const ImportReport report = import_common_voice(path("cv/en/train.tsv"));
  ASSERT_EQ(report.utterances.size(), 2u) << report.summary();
  EXPECT_EQ(report.entries, 5u);
  EXPECT_EQ(report.utterances[0].id, "clip_1");
  EXPECT_EQ(report.utterances[0].transcript, "Hello there, world!");
  EXPECT_EQ(report.utterances[0].audio_path, path("cv/en/clips/clip_1.mp3"));
  EXPECT_EQ(report.utterances[1].line, 3);
  // MP3 frames are 1152 samples; the decoder may pad the last one.
  EXPECT_NEAR(report.utterances[0].duration, 1.5, 1152.0 / 16000 + 1e-6);
  EXPECT_NEAR(report.utterances[1].duration, 0.8, 1152.0 / 16000 + 1e-6);
  const std::vector<std::string> why = reasons(report, root_);
  ASSERT_EQ(why.size(), 3u) << report.summary();
  EXPECT_TRUE(contains(why, "cv/en/train.tsv:4: audio file '")) << report.summary();
  EXPECT_TRUE(contains(why, "cv/en/train.tsv:5: empty transcript after normalization: '...'"))
      << report.summary();
  EXPECT_TRUE(contains(why, "cv/en/train.tsv:6: has 3 fields, the header has 10"))
      << report.summary();
  // The clips decode.
  EXPECT_GT(read_audio(report.utterances[0].audio_path).size(), 20000u);

  text("cv/en/bad.tsv", "client_id\tfile\ttext\n");
  EXPECT_THROW(import_common_voice(path("cv/en/bad.tsv")), Error);
}

TEST_F(ImportTest, KaldiWithSegments) {
  audio("audio/rec1.wav", 3.0);
  audio("audio/rec2.flac", 1.0);
  text("data/wav.scp", "rec1 " + path("audio/rec1.wav") + "\nrec2 " + path("audio/rec2.flac") +
                           "\nrec3 " + path("audio/absent.wav") + "\n");
  text("data/segments",
       "utt1 rec1 0.0 1.0\n"
       "utt2 rec1 1.0 -1\n"
       "utt3 rec2 0.25 0.75\n"
       "utt4 rec1 2.5 9.0\n"
       "utt5 rec9 0 1\n"
       "utt6 rec1 x 1\n"
       "utt7 rec2 0 0.5\n"
       "utt8 rec3 0 1\n");
  text("data/text",
       "utt1 first segment\n"
       "utt2 to the end\n"
       "utt3 of the flac\n"
       "utt4 past the end\n"
       "utt5 no such recording\n"
       "utt6 bad times\n"
       "utt9 not segmented\n"
       "utt8 missing file\n");
  const ImportReport report = import_kaldi(path("data"));
  ASSERT_EQ(report.utterances.size(), 4u) << report.summary();
  EXPECT_EQ(report.entries, 10u) << report.summary();  // 8 text lines and 2 segments lines dropped
  EXPECT_EQ(report.utterances[0].id, "utt1");
  EXPECT_EQ(report.utterances[0].offset, 0.0);
  EXPECT_EQ(report.utterances[0].duration, 1.0);
  EXPECT_EQ(report.utterances[1].offset, 1.0);
  EXPECT_NEAR(report.utterances[1].duration, 2.0, 1e-9);  // end -1: to the end of the file
  EXPECT_EQ(report.utterances[2].audio_path, path("audio/rec2.flac"));
  EXPECT_EQ(report.utterances[2].offset, 0.25);
  EXPECT_EQ(report.utterances[2].duration, 0.5);
  EXPECT_EQ(report.utterances[2].transcript, "of the flac");
  // utt4 runs past the end of its 3 s file: clipped to the end, with a warning.
  EXPECT_EQ(report.utterances[3].id, "utt4");
  EXPECT_EQ(report.utterances[3].offset, 2.5);
  EXPECT_NEAR(report.utterances[3].duration, 0.5, 1e-9);
  EXPECT_NEAR(report.seconds, 4.0, 1e-9);
  ASSERT_EQ(report.warnings.size(), 1u) << report.summary();
  EXPECT_EQ(report.warnings[0].line, 4);
  EXPECT_NE(report.warnings[0].file.find("data/text"), std::string::npos);
  EXPECT_NE(report.warnings[0].what.find("2.5 s + 6.5 s ends past the end of the file (3 s); "
                                         "clipped to 0.5 s"),
            std::string::npos)
      << report.summary();
  EXPECT_NE(report.summary().find("\n  warning: "), std::string::npos) << report.summary();
  const std::vector<std::string> why = reasons(report, root_);
  ASSERT_EQ(why.size(), 6u) << report.summary();
  EXPECT_TRUE(contains(why, "data/text:5: recording rec9 is not in")) << report.summary();
  EXPECT_TRUE(contains(why, "data/segments:6: expected '<utterance> <recording> <start> <end>'"))
      << report.summary();
  EXPECT_TRUE(contains(why, "data/text:7: utterance utt9 is not in")) << report.summary();
  EXPECT_TRUE(contains(why, "data/segments:7: utterance utt7 has no line in")) << report.summary();
  EXPECT_TRUE(contains(why, "data/text:8: audio file '")) << report.summary();  // missing file
  // utt6's segment was dropped, so its text line has no segment either.
  EXPECT_TRUE(contains(why, "data/text:6: utterance utt6 is not in")) << report.summary();

  // A NeMo manifest keeps the segments.
  write_manifest(path("kaldi.jsonl"), report.utterances);
  const Manifest manifest = read_manifest(path("kaldi.jsonl"));
  ASSERT_EQ(manifest.utterances.size(), 4u);
  EXPECT_EQ(manifest.utterances[2].id, "utt3");
  EXPECT_EQ(manifest.utterances[2].offset, 0.25);
  EXPECT_EQ(manifest.utterances[2].duration, 0.5);
  EXPECT_EQ(read_audio(manifest.utterances[2].audio_path, 0.25, 0.5).size(), 8000u);
}

TEST_F(ImportTest, KaldiWithoutSegmentsAndRelativePaths) {
  audio("audio/a.wav", 0.5);
  audio("audio/b.wav", 0.25);
  text("data/wav.scp", "a audio/a.wav\nb audio/b.wav\nc audio/c.wav\n");
  text("data/text", "a the first\nb\n");
  const fs::path cwd = fs::current_path();
  fs::current_path(root_);  // Kaldi paths are relative to the current directory
  const ImportReport report = import_kaldi("data");
  fs::current_path(cwd);
  ASSERT_EQ(report.utterances.size(), 1u) << report.summary();
  EXPECT_EQ(report.utterances[0].audio_path, path("audio/a.wav"));
  EXPECT_EQ(report.utterances[0].offset, 0.0);
  EXPECT_EQ(report.utterances[0].duration, 0.5);
  std::vector<std::string> why;
  for (const InputProblem& problem : report.dropped) why.push_back(to_string(problem));
  std::sort(why.begin(), why.end());
  ASSERT_EQ(why.size(), 2u) << report.summary();
  EXPECT_TRUE(why[0].starts_with("data/text:2: empty transcript")) << why[0];
  EXPECT_TRUE(why[1].starts_with("data/wav.scp:3: recording c has no line in data/text")) << why[1];
}

// The report lists the drops in file and line order, whichever check found
// them: here a repeated key (found as the file is read), lines naming no
// recording (found as the entries are matched) and a missing audio file
// (found when the entries are checked) used to come out in that order.
TEST_F(ImportTest, KaldiDropsAreListedInFileAndLineOrder) {
  audio("audio/a.wav", 0.5);
  text("data/wav.scp", "a " + path("audio/a.wav") + "\nb " + path("audio/absent.wav") + "\nc " +
                           path("audio/a.wav") + "\n");
  text("data/text", "a one\nx two\nb three\ny four\na five\n");
  const ImportReport report = import_kaldi(path("data"));
  ASSERT_EQ(report.utterances.size(), 1u) << report.summary();
  std::vector<std::string> where;
  for (const InputProblem& problem : report.dropped) {
    where.push_back(fs::relative(problem.file, root_).string() + ":" +
                    std::to_string(problem.line));
  }
  EXPECT_EQ(where, (std::vector<std::string>{"data/text:2", "data/text:3", "data/text:4",
                                             "data/text:5", "data/wav.scp:3"}))
      << report.summary();
}

// Commands and archive offsets in wav.scp are refused entry by entry: the
// good entries are kept, and every fault of the directory is reported at
// once (they used to end the import with nothing written, hiding the rest).
TEST_F(ImportTest, KaldiCommandsAreDroppedNamingFileAndLineAndTheRestKept) {
  audio("audio/a.wav", 0.5);
  text("data/wav.scp", "a " + path("audio/a.wav") +
                           "\nb sox x.wav -t wav - |\nc feats.ark:1234\nd cat y.wav |\ne " +
                           path("audio/absent.wav") + "\n");
  text("data/text", "a one\nb two\nc three\ne five\n");
  const ImportReport report = import_kaldi(path("data"));
  ASSERT_EQ(report.utterances.size(), 1u) << report.summary();
  EXPECT_EQ(report.utterances[0].id, "a");
  EXPECT_EQ(report.utterances[0].duration, 0.5);
  EXPECT_EQ(report.entries, 5u) << report.summary();  // 4 text lines, 1 wav.scp line
  const std::vector<std::string> why = reasons(report, root_);
  ASSERT_EQ(why.size(), 4u) << report.summary();
  EXPECT_EQ(why[0],
            "data/text:2: recording b (data/wav.scp:2) is a command ('sox x.wav -t wav - |'), "
            "which mpiasr does not run: write its audio to a file and list that");
  EXPECT_EQ(why[1],
            "data/text:3: recording c (data/wav.scp:3) is an archive offset ('feats.ark:1234'), "
            "which mpiasr does not run: write its audio to a file and list that");
  EXPECT_TRUE(why[2].starts_with("data/text:4: audio file 'audio/absent.wav': file not found"))
      << why[2];
  EXPECT_EQ(why[3],
            "data/wav.scp:4: recording d is a command ('cat y.wav |'), which mpiasr does not "
            "run: write its audio to a file and list that");

  // Nothing left: an error listing every fault.
  text("data/wav.scp", "b sox x.wav -t wav - |\n");
  text("data/text", "b two\n");
  try {
    import_kaldi(path("data"));
    FAIL() << "an import with nothing usable succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
    const std::string what = e.what();
    EXPECT_NE(what.find("nothing to import; kept 0 of 1 entries"), std::string::npos) << what;
    EXPECT_NE(what.find(path("data/text") + ":1: recording b (" + path("data/wav.scp") +
                        ":1) is a command"),
              std::string::npos)
        << what;
  }
  EXPECT_THROW(import_kaldi(path("no-such-dir")), Error);
}

}  // namespace
}  // namespace mpiasr
