// Bad input: every kind of broken manifest line, transcript and audio file is
// reported as "manifest:line: what", all at once, naming the audio file; with
// skip_bad exactly the bad entries are dropped.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "io/audio.h"
#include "io/manifest.h"
#include "io/utterance_check.h"
#include "src/base/error.h"
#include "tests/base/temp_dir.h"

namespace mpiasr {
namespace {

namespace fs = std::filesystem;

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Overwrites bytes of a file at `offset`.
void patch(const std::string& path, long offset, const std::string& bytes) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(offset);
  file.write(bytes.data(), bytes.size());
}

std::vector<float> tone(double seconds, int rate = 16000) {
  std::vector<float> x(std::llround(seconds * rate));
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.3f * std::sin(0.05f * i);
  return x;
}

// One good file and one broken file of every kind, in `dir`.
struct Corpus {
  explicit Corpus(const TempDir& dir) {
    write_audio(dir.file("good.wav"), tone(0.5), 1, 16000);
    write_audio(dir.file("good.flac"), tone(0.5, 44100), 1, 44100);
    write_audio(dir.file("empty.wav"), {}, 1, 16000);
    // A RIFF/WAVE file whose 'fmt ' chunk is garbage.
    write_audio(dir.file("corrupt.wav"), tone(0.5), 1, 16000);
    patch(dir.file("corrupt.wav"), 20, std::string(16, '\xff'));
    // Float samples with a NaN at frame 100 and an infinity at frame 200 (0.0125 s).
    std::vector<float> nan_samples = tone(0.5), inf_samples = tone(0.5);
    nan_samples[100] = std::numeric_limits<float>::quiet_NaN();
    inf_samples[200] = std::numeric_limits<float>::infinity();
    write_audio(dir.file("nan.wav"), nan_samples, 1, 16000, SampleEncoding::kFloat32);
    write_audio(dir.file("inf.wav"), inf_samples, 1, 16000, SampleEncoding::kFloat32);
    write_text(dir.file("song.m4a"), "....ftypM4A not something libsndfile reads");
  }
};

// The manifest: good lines (1, 4, 11, 12) and one bad entry per kind. Line
// 11's characters are no problem here: the tokenizer drops what it does not
// know.
const char* kManifest =
    "good.wav\thello world\n"         // 1
    "missing.wav\tnot there\n"        // 2
    "empty.wav\tno samples\n"         // 3
    "good.flac\tresampled is fine\n"  // 4
    "corrupt.wav\tbroken header\n"    // 5
    "nan.wav\tnot a number\n"         // 6
    "inf.wav\tinfinite\n"             // 7
    "song.m4a\tunsupported\n"         // 8
    "this line has no tab\n"          // 9
    "good.wav\t\n"                    // 10
    "good.wav\thello WORLD!\n"        // 11
    "good.wav\thello again\n";        // 12

TEST(ValidateManifest, ReportsEveryProblemAtOnce) {
  TempDir dir;
  Corpus corpus(dir);
  const std::string manifest = dir.file("train.tsv");
  write_text(manifest, kManifest);
  Manifest m = read_manifest(manifest);
  try {
    validate_manifest(m, {});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
    const std::string what = e.what();
    auto expect = [&](int line, const std::string& text) {
      EXPECT_NE(what.find(manifest + ":" + std::to_string(line) + ": " + text), std::string::npos)
          << "line " << line << " should say: " << text << "\nmessage:\n"
          << what;
    };
    EXPECT_NE(what.find("8 problem(s) in 8 of 12 entries"), std::string::npos) << what;
    expect(2, "audio file '" + dir.file("missing.wav") + "': file not found");
    expect(3, "audio file '" + dir.file("empty.wav") + "': has no samples");
    expect(5, "audio file '" + dir.file("corrupt.wav") + "': corrupt header (libsndfile: ");
    expect(6, "audio file '" + dir.file("nan.wav") +
                  "': non-finite sample (nan) at frame 100 (0.00625 s)");
    expect(7, "audio file '" + dir.file("inf.wav") +
                  "': non-finite sample (inf) at frame 200 (0.0125 s)");
    expect(8, "audio file '" + dir.file("song.m4a") + "': unsupported audio format");
    expect(9, "expected 'path<TAB>transcript', found no tab: this line has no tab");
    expect(10, "empty transcript");
    for (int good : {1, 4, 11, 12}) {
      EXPECT_EQ(what.find(manifest + ":" + std::to_string(good) + ":"), std::string::npos) << good;
    }
  }
}

TEST(ValidateManifest, SkipBadDropsExactlyTheBadEntries) {
  TempDir dir;
  Corpus corpus(dir);
  const std::string manifest = dir.file("train.tsv");
  write_text(manifest, kManifest);
  Manifest m = read_manifest(manifest);
  ValidationOptions options;
  options.skip_bad = true;
  ValidationReport report = validate_manifest(m, options);
  ASSERT_EQ(m.utterances.size(), 4u);
  EXPECT_EQ(m.utterances[0].line, 1);
  EXPECT_EQ(m.utterances[1].line, 4);
  EXPECT_EQ(m.utterances[2].line, 11);
  EXPECT_EQ(m.utterances[3].line, 12);
  EXPECT_TRUE(m.problems.empty());
  // Durations were filled from the headers.
  EXPECT_DOUBLE_EQ(m.utterances[0].duration, 0.5);
  EXPECT_DOUBLE_EQ(m.utterances[1].duration, 0.5);
  EXPECT_EQ(report.kept, 4u);
  EXPECT_EQ(report.dropped, 8u);
  std::vector<int> lines;
  for (const InputProblem& problem : report.problems) lines.push_back(problem.line);
  EXPECT_EQ(lines, (std::vector<int>{2, 3, 5, 6, 7, 8, 9, 10}));
  const std::string summary = report.summary();
  EXPECT_NE(summary.find("kept 4 of 12 utterances, dropped 8:"), std::string::npos) << summary;
  EXPECT_NE(summary.find(manifest + ":9: expected 'path<TAB>transcript'"), std::string::npos)
      << summary;
}

TEST(ValidateManifest, WithoutSampleCheckNonFiniteSamplesPass) {
  TempDir dir;
  Corpus corpus(dir);
  const std::string manifest = dir.file("m.tsv");
  write_text(manifest, "nan.wav\tx\ninf.wav\ty\ngood.wav\tz\n");
  Manifest m = read_manifest(manifest);
  ValidationOptions options;
  options.check_samples = false;
  ValidationReport report = validate_manifest(m, options);
  EXPECT_EQ(report.kept, 3u);
  EXPECT_TRUE(report.problems.empty());
}

TEST(ValidateManifest, SameReportOnOneThreadAndMany) {
  TempDir dir;
  Corpus corpus(dir);
  const std::string manifest = dir.file("train.tsv");
  write_text(manifest, kManifest);
  std::vector<std::string> summaries;
  for (int threads : {1, 4}) {
    Manifest m = read_manifest(manifest);
    ValidationOptions options;
    options.skip_bad = true;
    options.threads = threads;
    summaries.push_back(validate_manifest(m, options).summary());
  }
  EXPECT_EQ(summaries[0], summaries[1]);
}

// A segment that starts past the end of its file, or has no length, is a bad
// utterance; one that starts inside the file and runs past its end (more than
// the tolerance) is clipped to the end of the file, with a warning.
TEST(ValidateManifest, SegmentsOutsideTheFile) {
  TempDir dir;
  write_audio(dir.file("a.wav"), tone(1.0), 1, 16000);
  const std::string manifest = dir.file("m.json");
  write_text(
      manifest,
      "{\"audio_filepath\": \"a.wav\", \"text\": \"ok\", \"offset\": 0.5}\n"
      "{\"audio_filepath\": \"a.wav\", \"text\": \"late\", \"offset\": 1.5}\n"
      "{\"audio_filepath\": \"a.wav\", \"text\": \"over\", \"offset\": 0.25, \"duration\": 0.95}\n"
      "{\"audio_filepath\": \"a.wav\", \"text\": \"none\", \"offset\": 0.5, \"duration\": 0}\n"
      "{\"audio_filepath\": \"a.wav\", \"text\": \"near\", \"offset\": 0.5, \"duration\": 0.54}\n");
  Manifest m = read_manifest(manifest);
  ValidationOptions options;
  options.skip_bad = true;
  ValidationReport report = validate_manifest(m, options);
  ASSERT_EQ(m.utterances.size(), 3u);
  EXPECT_EQ(m.utterances[0].transcript, "ok");
  EXPECT_DOUBLE_EQ(m.utterances[0].duration, 0.5);
  EXPECT_EQ(m.utterances[1].transcript, "over");
  EXPECT_DOUBLE_EQ(m.utterances[1].duration, 0.75);  // 1 s file - 0.25 s offset
  EXPECT_EQ(m.utterances[2].transcript, "near");
  EXPECT_DOUBLE_EQ(m.utterances[2].duration, 0.54);  // within the tolerance: kept as written
  ASSERT_EQ(report.problems.size(), 2u);
  EXPECT_EQ(to_string(report.problems[0]).substr(0, manifest.size() + 3), manifest + ":2:");
  EXPECT_NE(report.problems[0].what.find("offset 1.5 s is past the end of the file (1 s)"),
            std::string::npos);
  EXPECT_NE(report.problems[1].what.find("zero-length segment"), std::string::npos);
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_EQ(to_string(report.warnings[0]),
            manifest + ":3: audio file '" + dir.file("a.wav") +
                "': segment 0.25 s + 0.95 s ends past the end of the file (1 s); clipped to "
                "0.75 s");
  // The clipped segment reads: exactly the last 0.75 s of the file.
  EXPECT_EQ(
      read_audio(m.utterances[1].audio_path, m.utterances[1].offset, m.utterances[1].duration, 0)
          .size(),
      12000u);
}

TEST(ValidateManifest, TranscriptsThatAreNotUtf8) {
  TempDir dir;
  write_audio(dir.file("a.wav"), tone(0.2), 1, 16000);
  write_text(dir.file("m.tsv"), "a.wav\tfine\na.wav\tbad \xff byte\n");
  Manifest m = read_manifest(dir.file("m.tsv"));
  ValidationOptions options;
  options.skip_bad = true;
  ValidationReport report = validate_manifest(m, options);
  ASSERT_EQ(report.problems.size(), 1u);
  EXPECT_EQ(report.problems[0].line, 2);
  EXPECT_NE(report.problems[0].what.find("transcript is not UTF-8"), std::string::npos);
}

TEST(ValidateManifest, EmptyTranscriptsAllowedWhenNotRequired) {
  TempDir dir;
  write_audio(dir.file("a.wav"), tone(0.2), 1, 16000);
  write_text(dir.file("m.tsv"), "a.wav\t\n");
  Manifest m = read_manifest(dir.file("m.tsv"));
  ValidationOptions options;
  options.require_transcript = false;
  EXPECT_EQ(validate_manifest(m, options).kept, 1u);
}

TEST(ValidateManifest, NothingLeftIsAnErrorEvenWhenSkipping) {
  TempDir dir;
  write_text(dir.file("m.tsv"), "missing.wav\tx\n");
  Manifest m = read_manifest(dir.file("m.tsv"));
  ValidationOptions options;
  options.skip_bad = true;
  try {
    validate_manifest(m, options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no usable utterance"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(dir.file("m.tsv") + ":1: audio file"), std::string::npos);
  }
  write_text(dir.file("empty.tsv"), "# only a comment\n");
  Manifest empty = read_manifest(dir.file("empty.tsv"));
  EXPECT_THROW(validate_manifest(empty, {}), Error);
}

// read_audio on its own names the file and the problem.
TEST(ReadAudio, ErrorsNameTheFileAndTheProblem) {
  TempDir dir;
  Corpus corpus(dir);
  auto message = [](const std::string& path) -> std::string {
    try {
      read_audio(path);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kBadInput);
      return e.what();
    }
    return "no error";
  };
  auto expect = [&](const std::string& name, const std::string& text) {
    std::string what = message(dir.file(name));
    EXPECT_NE(what.find("audio file '" + dir.file(name) + "': " + text), std::string::npos) << what;
  };
  expect("missing.wav", "file not found");
  fs::create_symlink(dir.file("loop2.wav"), dir.file("loop1.wav"));
  fs::create_symlink(dir.file("loop1.wav"), dir.file("loop2.wav"));
  expect("loop1.wav", "a symbolic link loop (too many levels of symbolic links)");
  expect("empty.wav", "has no samples");
  write_text(dir.file("zero.wav"), "");
  expect("zero.wav", "the file is empty (0 bytes)");
  expect("corrupt.wav", "corrupt header (libsndfile: Error in WAV");
  expect("song.m4a", "unsupported audio format (libsndfile: Format not recognised");
  expect("nan.wav", "non-finite sample (nan) at frame 100");
  expect("inf.wav", "non-finite sample (inf) at frame 200");
  // A finite float near the top of the range: resampled to 16 kHz it would
  // overflow to infinity (found by tests/fuzz/audio_fuzz). A float file at
  // the 16-bit integer scale is still fine.
  std::vector<float> huge = tone(0.1, 44100);
  huge[300] = 3e38f;
  write_audio(dir.file("huge.wav"), huge, 1, 44100, SampleEncoding::kFloat32);
  expect("huge.wav", "sample out of range (3e+38) at frame 300");
  std::vector<float> int_scale = tone(0.1, 44100);
  for (float& x : int_scale) x *= 32768;
  write_audio(dir.file("int_scale.wav"), int_scale, 1, 44100, SampleEncoding::kFloat32);
  EXPECT_EQ(read_audio(dir.file("int_scale.wav")).size(), 1600u);
  // A FLAC file cut short: the header promises more frames than the data holds.
  std::vector<float> noise(16000);
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = 0.2f * std::sin(i * i * 0.001f);
  write_audio(dir.file("cut.flac"), noise, 1, 16000);
  fs::resize_file(dir.file("cut.flac"), fs::file_size(dir.file("cut.flac")) / 2);
  expect("cut.flac", "truncated: the header says 16000 frames (1.000 s), the file holds ");
}

// A file cut short, and a header that claims more data than the file holds,
// are found from the headers alone (train's start-up reads no samples), named
// with both lengths, fatal by default and dropped with skip_bad.
TEST(ValidateManifest, TruncatedAudioIsFoundFromTheHeaders) {
  TempDir dir;
  write_audio(dir.file("good.wav"), tone(0.5), 1, 16000);
  // 16000 frames of 16-bit PCM after a 44-byte header, cut to 10000 bytes of samples.
  write_audio(dir.file("cut.wav"), tone(1.0), 1, 16000);
  fs::resize_file(dir.file("cut.wav"), 44 + 10000);
  // The data chunk says 64000 bytes; the file holds the 32000 of 1 s.
  write_audio(dir.file("claims.wav"), tone(1.0), 1, 16000);
  patch(dir.file("claims.wav"), 40, std::string("\x00\xfa\x00\x00", 4));
  std::vector<float> noise(16000);
  for (size_t i = 0; i < noise.size(); ++i) noise[i] = 0.2f * std::sin(i * i * 0.001f);
  write_audio(dir.file("cut.flac"), noise, 1, 16000);
  fs::resize_file(dir.file("cut.flac"), fs::file_size(dir.file("cut.flac")) / 2);
  write_text(dir.file("m.tsv"),
             "good.wav\tfine\ncut.wav\tcut short\nclaims.wav\tclaims more\ncut.flac\tcut flac\n");

  ValidationOptions options;
  options.check_samples = false;
  Manifest strict = read_manifest(dir.file("m.tsv"));
  try {
    validate_manifest(strict, options);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
    const std::string what = e.what();
    auto expect = [&](int line, const std::string& name, const std::string& text) {
      const std::string expected = dir.file("m.tsv") + ":" + std::to_string(line) +
                                   ": audio file '" + dir.file(name) + "': truncated: " + text;
      EXPECT_NE(what.find(expected), std::string::npos) << expected << "\nin:\n" << what;
    };
    expect(2, "cut.wav",
           "the header says 32000 bytes of samples (1.000 s), the file holds 10000 (0.312 s)");
    expect(3, "claims.wav",
           "the header says 64000 bytes of samples (2.000 s), the file holds 32000 (1.000 s)");
    // libsndfile writes FLAC in blocks of 4096 frames; half the file holds the
    // first block whole and breaks off inside the second.
    expect(4, "cut.flac",
           "the header says 16000 frames (1.000 s), the file holds 4096 frames (0.256 s)");
    EXPECT_NE(what.find("3 problem(s) in 3 of 4 entries"), std::string::npos) << what;
  }
  options.skip_bad = true;
  Manifest skipped = read_manifest(dir.file("m.tsv"));
  const ValidationReport report = validate_manifest(skipped, options);
  EXPECT_EQ(report.dropped, 3u);
  ASSERT_EQ(skipped.utterances.size(), 1u);
  EXPECT_EQ(skipped.utterances[0].transcript, "fine");
}

// A WAV whose data chunk declares fewer bytes than follow it (samples
// appended after the header was written) is read as far as its header says,
// as libsndfile and every WAV reader do, and kept with a warning naming both
// lengths; one whose data chunk is followed by whole chunks (LIST) or by
// less than a frame is a normal file. The warning comes from the headers
// alone, and again when they come from the duration cache.
TEST(ValidateManifest, DataPastTheDataChunkIsReadAsTheHeaderSaysWithAWarning) {
  TempDir dir;
  const std::vector<float> samples = tone(1.0);
  // 1 s of 16-bit PCM (32000 bytes after the 44-byte header); the data chunk says 16000.
  write_audio(dir.file("short.wav"), samples, 1, 16000);
  patch(dir.file("short.wav"), 40, std::string("\x80\x3e\x00\x00", 4));
  // 0.5 s, then a LIST chunk of 4 bytes; 0.5 s, then one stray byte.
  write_audio(dir.file("listed.wav"), tone(0.5), 1, 16000);
  std::ofstream(dir.file("listed.wav"), std::ios::binary | std::ios::app)
      << std::string("LIST\x04\x00\x00\x00INFO", 12);
  write_audio(dir.file("stray.wav"), tone(0.5), 1, 16000);
  std::ofstream(dir.file("stray.wav"), std::ios::binary | std::ios::app) << 'x';
  write_text(dir.file("m.tsv"), "listed.wav\tlisted\nshort.wav\tshort\nstray.wav\tstray\n");
  const std::string note = "data past its data chunk: the header says ";
  for (const char* pass : {"headers read", "from the cache"}) {
    SCOPED_TRACE(pass);
    Manifest m = read_manifest(dir.file("m.tsv"));
    const ValidationReport report = validate_manifest(m, {});
    EXPECT_EQ(report.kept, 3u);
    EXPECT_TRUE(report.problems.empty()) << report.summary();
    ASSERT_EQ(report.warnings.size(), 1u) << report.summary();
    EXPECT_EQ(report.warnings[0].line, 2);
    EXPECT_EQ(report.warnings[0].what,
              "audio file '" + dir.file("short.wav") + "': " + note +
                  "16000 bytes of samples (0.500 s), the file holds 32000 (1.000 s) from the "
                  "chunk's start, and what follows the chunk is no chunk; only the header's part "
                  "is read");
    for (const Utterance& u : m.utterances) EXPECT_DOUBLE_EQ(u.duration, 0.5) << u.audio_path;
  }
  std::ifstream cache(dir.file("m.tsv") + ".durations");
  const std::string cached((std::istreambuf_iterator<char>(cache)), {});
  EXPECT_NE(cached.find(note + "16000 bytes"), std::string::npos) << cached;
  // The declared half, sample for sample (16-bit: within half a step).
  const std::vector<float> read = read_audio(dir.file("short.wav"), 0, -1, 0);
  ASSERT_EQ(read.size(), 8000u);
  for (size_t i = 0; i < read.size(); ++i) ASSERT_NEAR(read[i], samples[i], 1.0 / 32768) << i;
}

}  // namespace
}  // namespace mpiasr
