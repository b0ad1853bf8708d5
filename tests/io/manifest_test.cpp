// Manifest readers (tsv, NeMo JSON lines, SpeechBrain CSV) and the sidecar
// cache of audio durations, on manifests and audio written here.
#include "io/manifest.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "io/utterance_check.h"
#include "src/base/error.h"
#include "tests/base/temp_dir.h"

namespace mpiasr {
namespace {

namespace fs = std::filesystem;

void write_text(const std::string& path, const std::string& text) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

std::string read_text(const std::string& path) {
  std::ostringstream text;
  text << std::ifstream(path).rdbuf();
  return text.str();
}

// `seconds` of silence at `rate` Hz, mono.
void write_silence(const std::string& path, double seconds, int rate = 16000) {
  fs::create_directories(fs::path(path).parent_path());
  write_audio(path, std::vector<float>(std::llround(seconds * rate), 0.0f), 1, rate);
}

TEST(ReadManifest, TsvWithCommentsBlankLinesAndRelativePaths) {
  TempDir dir;
  const std::string manifest = dir.file("lists/train.tsv");
  write_text(manifest,
             "# a comment\n"
             "\n"
             "audio/a.wav\thello world\n"
             "/abs/b.flac\t  spaced out  \r\n"
             "   \n"
             "../up/c.ogg\tthird\n");
  Manifest m = read_manifest(manifest);
  EXPECT_EQ(m.path, manifest);
  EXPECT_TRUE(m.problems.empty());
  ASSERT_EQ(m.utterances.size(), 3u);
  EXPECT_EQ(m.utterances[0].audio_path, dir.file("lists/audio/a.wav"));
  EXPECT_EQ(m.utterances[0].transcript, "hello world");
  EXPECT_EQ(m.utterances[0].line, 3);
  EXPECT_EQ(m.utterances[0].duration, -1);
  EXPECT_EQ(m.utterances[1].audio_path, "/abs/b.flac");
  EXPECT_EQ(m.utterances[1].transcript, "spaced out");
  EXPECT_EQ(m.utterances[1].line, 4);
  EXPECT_EQ(m.utterances[2].audio_path, dir.file("up/c.ogg"));
  EXPECT_EQ(m.utterances[2].line, 6);
}

TEST(ReadManifest, TsvMalformedLinesAreRecordedWithTheirLine) {
  TempDir dir;
  const std::string manifest = dir.file("m.txt");
  write_text(manifest, "a.wav\tok\nno tab here\nb.wav\tone\ttwo\nc.wav\t\n");
  Manifest m = read_manifest(manifest);
  ASSERT_EQ(m.utterances.size(), 2u);
  EXPECT_EQ(m.utterances[1].line, 4);
  EXPECT_EQ(m.utterances[1].transcript, "");  // empty transcripts are validate_manifest's call
  ASSERT_EQ(m.problems.size(), 2u);
  EXPECT_EQ(m.problems[0].file, manifest);
  EXPECT_EQ(m.problems[0].line, 2);
  EXPECT_EQ(to_string(m.problems[0]),
            manifest + ":2: expected 'path<TAB>transcript', found no tab: no tab here");
  EXPECT_EQ(m.problems[1].line, 3);
  EXPECT_NE(m.problems[1].what.find("more than one tab"), std::string::npos);
}

TEST(ReadManifest, NemoJsonLines) {
  TempDir dir;
  const std::string manifest = dir.file("data/dev.json");
  write_text(manifest,
             "{\"audio_filepath\": \"wavs/a.wav\", \"text\": \"first one\", \"duration\": 1.5}\n"
             "\n"
             "{\"audio_filepath\": \"/x/long.flac\", \"text\": \"segment\", \"offset\": 2.25, "
             "\"duration\": 0.75, \"lang\": \"en\"}\n"
             "{\"audio_filepath\": \"b.wav\", \"text\": \"no duration\"}\n"
             "{\"audio_filepath\": \"c.wav\", \"text\": \"cut\" \n"
             "{\"text\": \"no path\"}\n"
             "{\"audio_filepath\": \"d.wav\", \"text\": \"bad\", \"duration\": \"long\"}\n"
             "{\"audio_filepath\": \"e.wav\", \"text\": \"bad\", \"offset\": -1}\n");
  Manifest m = read_manifest(manifest);
  ASSERT_EQ(m.utterances.size(), 3u);
  EXPECT_EQ(m.utterances[0].audio_path, dir.file("data/wavs/a.wav"));
  EXPECT_EQ(m.utterances[0].transcript, "first one");
  EXPECT_EQ(m.utterances[0].duration, 1.5);
  EXPECT_EQ(m.utterances[0].offset, 0);
  EXPECT_EQ(m.utterances[0].line, 1);
  EXPECT_EQ(m.utterances[1].audio_path, "/x/long.flac");
  EXPECT_EQ(m.utterances[1].offset, 2.25);
  EXPECT_EQ(m.utterances[1].duration, 0.75);
  EXPECT_EQ(m.utterances[1].id, "/x/long.flac@2.25");
  EXPECT_EQ(m.utterances[1].line, 3);
  EXPECT_EQ(m.utterances[2].duration, -1);
  EXPECT_EQ(m.utterances[2].line, 4);
  ASSERT_EQ(m.problems.size(), 4u);
  EXPECT_EQ(m.problems[0].line, 5);
  EXPECT_NE(m.problems[0].what.find("invalid JSON"), std::string::npos) << m.problems[0].what;
  EXPECT_NE(m.problems[0].what.find("\"cut\""), std::string::npos) << m.problems[0].what;
  EXPECT_EQ(m.problems[1].line, 6);
  EXPECT_NE(m.problems[1].what.find("no \"audio_filepath\" field"), std::string::npos);
  EXPECT_EQ(m.problems[2].line, 7);
  EXPECT_NE(m.problems[2].what.find("\"duration\" is not a number"), std::string::npos);
  EXPECT_EQ(m.problems[3].line, 8);
  EXPECT_NE(m.problems[3].what.find("negative"), std::string::npos);
}

// A number too large for a double is a bad line like any other, not an
// exception that ends the program (found by tests/fuzz/manifest_nemo_fuzz).
TEST(ReadManifest, NemoNumberOutOfRangeIsABadLine) {
  TempDir dir;
  const std::string manifest = dir.file("big.jsonl");
  write_text(manifest,
             "{\"audio_filepath\": \"a.wav\", \"text\": \"x\", \"offset\": 2e308}\n"
             "{\"audio_filepath\": \"b.wav\", \"text\": \"fine\"}\n");
  Manifest m = read_manifest(manifest);
  ASSERT_EQ(m.utterances.size(), 1u);
  EXPECT_EQ(m.utterances[0].line, 2);
  ASSERT_EQ(m.problems.size(), 1u);
  EXPECT_EQ(m.problems[0].line, 1);
  EXPECT_NE(m.problems[0].what.find("invalid JSON ("), std::string::npos) << m.problems[0].what;
  EXPECT_NE(m.problems[0].what.find("number overflow parsing '2e308'"), std::string::npos)
      << m.problems[0].what;
}

TEST(ReadManifest, SpeechBrainCsvWithSubstitutions) {
  TempDir dir;
  const std::string manifest = dir.file("train.csv");
  write_text(manifest,
             "ID,duration,wav,spk_id,wrd\n"
             "utt1,2.5,$data_root/a.flac,spk1,HELLO WORLD\n"
             "utt2,1.25,${data_root}/sub/b.flac,spk2,\"WITH, COMMA AND \"\"QUOTE\"\"\"\n"
             "utt3,1.0,rel/c.wav,spk1,RELATIVE\n"
             "utt4,1.0,$missing/d.wav,spk1,UNKNOWN VARIABLE\n"
             "utt5,1.0,e.wav,spk1\n"
             "utt6,abc,f.wav,spk1,BAD DURATION\n"
             "utt7,1.0,g.wav,spk1,\"UNTERMINATED\n");
  ManifestOptions options;
  options.substitutions = {{"data_root", "/corpus/LibriSpeech"}};
  Manifest m = read_manifest(manifest, options);
  ASSERT_EQ(m.utterances.size(), 3u);
  EXPECT_EQ(m.utterances[0].id, "utt1");
  EXPECT_EQ(m.utterances[0].audio_path, "/corpus/LibriSpeech/a.flac");
  EXPECT_EQ(m.utterances[0].transcript, "HELLO WORLD");
  EXPECT_EQ(m.utterances[0].duration, 2.5);
  EXPECT_EQ(m.utterances[0].line, 2);
  EXPECT_EQ(m.utterances[1].audio_path, "/corpus/LibriSpeech/sub/b.flac");
  EXPECT_EQ(m.utterances[1].transcript, "WITH, COMMA AND \"QUOTE\"");
  EXPECT_EQ(m.utterances[2].audio_path, dir.file("rel/c.wav"));
  EXPECT_EQ(m.utterances[2].line, 4);
  ASSERT_EQ(m.problems.size(), 4u);
  EXPECT_EQ(m.problems[0].line, 5);
  EXPECT_NE(m.problems[0].what.find("unknown variable $missing"), std::string::npos)
      << m.problems[0].what;
  EXPECT_NE(m.problems[0].what.find("data_root"), std::string::npos);
  EXPECT_EQ(m.problems[1].line, 6);
  EXPECT_NE(m.problems[1].what.find("has 4 fields, the header has 5"), std::string::npos);
  EXPECT_EQ(m.problems[2].line, 7);
  EXPECT_NE(m.problems[2].what.find("duration 'abc' is not a number"), std::string::npos);
  EXPECT_EQ(m.problems[3].line, 8);
  EXPECT_NE(m.problems[3].what.find("unterminated"), std::string::npos);
}

TEST(ReadManifest, SpeechBrainColumnsAreFoundByName) {
  TempDir dir;
  const std::string manifest = dir.file("m.csv");
  write_text(manifest, "wrd,wav\nsome words,x.wav\n");
  Manifest m = read_manifest(manifest);
  ASSERT_EQ(m.utterances.size(), 1u);
  EXPECT_EQ(m.utterances[0].transcript, "some words");
  EXPECT_EQ(m.utterances[0].audio_path, dir.file("x.wav"));
  EXPECT_EQ(m.utterances[0].duration, -1);

  write_text(manifest, "ID,duration,path,words\nu,1,x.wav,w\n");
  try {
    read_manifest(manifest);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
    EXPECT_NE(
        std::string(e.what()).find(manifest + ":1: CSV header needs the columns 'wav' and 'wrd'"),
        std::string::npos)
        << e.what();
  }
}

TEST(ReadManifest, SubstitutionAppliesToEveryFormat) {
  TempDir dir;
  write_text(dir.file("m.tsv"), "$root/a.wav\tx\n");
  ManifestOptions options;
  options.substitutions = {{"root", "/data"}};
  EXPECT_EQ(read_manifest(dir.file("m.tsv"), options).utterances.at(0).audio_path, "/data/a.wav");
}

TEST(ReadManifest, FormatFromOptionOrExtension) {
  TempDir dir;
  const std::string json_line = "{\"audio_filepath\": \"a.wav\", \"text\": \"x\"}\n";
  write_text(dir.file("m.jsonl"), json_line);
  EXPECT_EQ(read_manifest(dir.file("m.jsonl")).utterances.size(), 1u);
  write_text(dir.file("m.manifest"), json_line);
  ManifestOptions nemo;
  nemo.format = "nemo";
  EXPECT_EQ(read_manifest(dir.file("m.manifest"), nemo).utterances.size(), 1u);
  try {
    read_manifest(dir.file("m.manifest"));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot tell the format from the extension '.manifest'"),
              std::string::npos)
        << e.what();
  }
  // Read as tsv, a JSON line has no tab.
  ManifestOptions tsv;
  tsv.format = "tsv";
  EXPECT_EQ(read_manifest(dir.file("m.jsonl"), tsv).problems.size(), 1u);
  ManifestOptions unknown;
  unknown.format = "kaldi";
  EXPECT_THROW(read_manifest(dir.file("m.jsonl"), unknown), Error);
  EXPECT_THROW(read_manifest(dir.file("missing.tsv")), Error);
}

std::vector<Utterance> sample_utterances(const TempDir& dir) {
  std::vector<Utterance> utterances(3);
  utterances[0] = {"u1", dir.file("a b.wav"), "Hello,  \"world\"\tagain", 0, 1.25, 0};
  utterances[1] = {"u2", dir.file("c.flac"), "second one", 0, 0.5, 0};
  utterances[2] = {"u,3", dir.file("d.wav"), "third", 0, 2, 0};
  return utterances;
}

TEST(WriteManifest, EachFormatReadsBackTheSameUtterances) {
  TempDir dir;
  for (const char* name : {"out.tsv", "out.jsonl", "out.csv"}) {
    const std::vector<Utterance> written = sample_utterances(dir);
    write_manifest(dir.file(name), written);
    const Manifest read = read_manifest(dir.file(name));
    ASSERT_EQ(read.utterances.size(), written.size()) << name;
    EXPECT_TRUE(read.problems.empty()) << name << ": " << to_string(read.problems[0]);
    const bool tsv = std::string(name) == "out.tsv";
    for (size_t i = 0; i < written.size(); ++i) {
      const Utterance& u = read.utterances[i];
      EXPECT_EQ(u.audio_path, written[i].audio_path) << name;
      EXPECT_EQ(u.transcript, i == 0 ? "Hello, \"world\" again" : written[i].transcript) << name;
      EXPECT_EQ(u.duration, tsv ? -1.0 : written[i].duration) << name;  // tsv has no durations
      EXPECT_EQ(u.id, tsv ? written[i].audio_path : written[i].id) << name;
      EXPECT_EQ(u.line, int(i) + (std::string(name) == "out.csv" ? 2 : 1)) << name;
    }
  }
}

TEST(WriteManifest, SegmentsNeedNemo) {
  TempDir dir;
  std::vector<Utterance> utterances = sample_utterances(dir);
  utterances[1].offset = 3.5;
  write_manifest(dir.file("segments.jsonl"), utterances);
  const Manifest read = read_manifest(dir.file("segments.jsonl"));
  EXPECT_EQ(read.utterances[1].offset, 3.5);
  EXPECT_EQ(read.utterances[1].duration, 0.5);
  for (const char* name : {"segments.tsv", "segments.csv"}) {
    try {
      write_manifest(dir.file(name), utterances);
      ADD_FAILURE() << name << " took a segment";
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kUsage);
      EXPECT_NE(std::string(e.what()).find("utterance u2 is a segment"), std::string::npos)
          << e.what();
    }
    EXPECT_FALSE(fs::exists(dir.file(name)));
  }
}

// Durations missing from the manifest are filled when it is validated, from
// the audio headers through the sidecar cache; the samples are not read here,
// so a doctored cache entry shows as a hit.
void fill_durations(Manifest& manifest) {
  ValidationOptions headers_only;
  headers_only.check_samples = false;
  validate_manifest(manifest, headers_only);
}

TEST(Durations, FromHeadersMinusOffsetAndKeepsManifestValues) {
  TempDir dir;
  write_silence(dir.file("a.wav"), 1.5);
  write_silence(dir.file("b.flac"), 2.0, 44100);
  write_text(dir.file("m.json"),
             "{\"audio_filepath\": \"a.wav\", \"text\": \"x\"}\n"
             "{\"audio_filepath\": \"b.flac\", \"text\": \"y\", \"offset\": 0.5}\n"
             "{\"audio_filepath\": \"b.flac\", \"text\": \"z\", \"duration\": 0.25}\n");
  Manifest m = read_manifest(dir.file("m.json"));
  fill_durations(m);
  EXPECT_DOUBLE_EQ(m.utterances[0].duration, 1.5);
  EXPECT_DOUBLE_EQ(m.utterances[1].duration, 1.5);
  EXPECT_DOUBLE_EQ(m.utterances[2].duration, 0.25);
}

// Replaces the frame count of every entry of a cache file, to tell a cache hit
// from a header read.
void set_cached_frames(const std::string& cache, int64_t frames) {
  std::istringstream in(read_text(cache));
  std::string out, line;
  while (std::getline(in, line)) {
    if (!line.starts_with('#')) {
      std::vector<std::string> fields;
      std::istringstream split(line);
      for (std::string field; std::getline(split, field, '\t');) fields.push_back(field);
      fields.at(4) = std::to_string(frames);
      line.clear();
      for (size_t i = 0; i < fields.size(); ++i) line += (i ? "\t" : "") + fields[i];
    }
    out += line + "\n";
  }
  write_text(cache, out);
}

TEST(DurationCache, HitAndInvalidation) {
  TempDir dir;
  const std::string manifest = dir.file("m.tsv"), cache = manifest + ".durations";
  write_silence(dir.file("a.wav"), 1.0);
  write_text(manifest, "a.wav\tx\n");

  Manifest first = read_manifest(manifest);
  fill_durations(first);
  EXPECT_DOUBLE_EQ(first.utterances[0].duration, 1.0);
  ASSERT_TRUE(fs::exists(cache));
  EXPECT_NE(read_text(cache).find(fs::absolute(dir.file("a.wav")).string()), std::string::npos);

  // A hit: the (doctored) cached header is used, the audio file is not read.
  set_cached_frames(cache, 16000 * 7);
  Manifest hit = read_manifest(manifest);
  fill_durations(hit);
  EXPECT_DOUBLE_EQ(hit.utterances[0].duration, 7.0);

  // Same size, newer modification time: the header is read again and the cache updated.
  fs::last_write_time(dir.file("a.wav"),
                      fs::last_write_time(dir.file("a.wav")) + std::chrono::seconds(5));
  Manifest touched = read_manifest(manifest);
  fill_durations(touched);
  EXPECT_DOUBLE_EQ(touched.utterances[0].duration, 1.0);

  // A changed file (other size) is read again.
  set_cached_frames(cache, 16000 * 7);
  write_silence(dir.file("a.wav"), 2.0);
  Manifest changed = read_manifest(manifest);
  fill_durations(changed);
  EXPECT_DOUBLE_EQ(changed.utterances[0].duration, 2.0);

  // Disabled: neither read nor written.
  set_cached_frames(cache, 16000 * 7);
  ManifestOptions no_cache;
  no_cache.use_duration_cache = false;
  fs::last_write_time(dir.file("a.wav"),
                      fs::last_write_time(dir.file("a.wav")) + std::chrono::seconds(5));
  Manifest uncached = read_manifest(manifest, no_cache);
  fill_durations(uncached);
  EXPECT_DOUBLE_EQ(uncached.utterances[0].duration, 2.0);
  EXPECT_NE(read_text(cache).find("\t112000\t"), std::string::npos) << "cache was rewritten";
}

// A cache that cannot be written is skipped, but not silently: a warning
// on the manifest (line 0) says why and what it costs.
TEST(DurationCache, UnwritableCacheIsSkippedWithAWarning) {
  TempDir dir;
  const std::string manifest = dir.file("m.tsv");
  write_silence(dir.file("a.wav"), 0.5);
  write_text(manifest, "a.wav\tx\n");
  // A folder where the cache file would go: it cannot be replaced by a file.
  fs::create_directory(manifest + ".durations");
  Manifest m = read_manifest(manifest);
  ValidationOptions headers_only;
  headers_only.check_samples = false;
  const ValidationReport report = validate_manifest(m, headers_only);
  EXPECT_DOUBLE_EQ(m.utterances[0].duration, 0.5);
  ASSERT_EQ(report.warnings.size(), 1u);
  EXPECT_EQ(to_string(report.warnings[0]),
            manifest + ": cannot write its duration cache '" + manifest +
                ".durations' (is a folder, not a file): every run reads the audio headers again");
  EXPECT_TRUE(fs::is_directory(manifest + ".durations"));
  // No temporary file is left behind.
  int files = 0;
  for (const auto& entry : fs::directory_iterator(dir.path())) files += entry.is_regular_file();
  EXPECT_EQ(files, 2);
}

}  // namespace
}  // namespace mpiasr
