// The Common Voice importer: a release's TSV with "path" and "sentence"
// columns, clips in "clips/" beside it; see corpus_import.h.
#include <sndfile.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "io/corpus_import.h"
#include "src/base/error.h"

namespace mpiasr {

namespace fs = std::filesystem;

namespace {

std::vector<std::string> split_tabs(const std::string& line) {
  std::vector<std::string> fields(1);
  for (char c : line) {
    if (c == '\t') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  return fields;
}

}  // namespace

ImportReport import_common_voice(const std::string& tsv_path) {
  std::ifstream in(tsv_path, std::ios::binary);
  if (!in) MPIASR_FAIL(ExitCode::kBadInput, "Common Voice TSV '" << tsv_path << "': cannot open");
  const fs::path clips = fs::absolute(fs::path(tsv_path)).parent_path() / "clips";
  std::string line;
  if (!std::getline(in, line)) MPIASR_FAIL(ExitCode::kBadInput, tsv_path << ": empty file");
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.starts_with("\xEF\xBB\xBF")) line.erase(0, 3);
  const std::vector<std::string> header = split_tabs(line);
  const auto column = [&](const char* name) {
    return int(std::find(header.begin(), header.end(), name) - header.begin());
  };
  const int path_column = column("path"), sentence_column = column("sentence");
  if (path_column == int(header.size()) || sentence_column == int(header.size())) {
    MPIASR_FAIL(ExitCode::kBadInput, tsv_path << ":1: the header needs the columns 'path' and "
                                                 "'sentence', found: "
                                              << line);
  }

  std::vector<detail::ImportEntry> entries;
  std::vector<InputProblem> dropped;
  bool any_mp3 = false;
  int line_number = 1;
  while (std::getline(in, line)) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    const std::vector<std::string> fields = split_tabs(line);
    if (fields.size() != header.size()) {
      dropped.push_back({tsv_path, line_number,
                         "has " + std::to_string(fields.size()) + " fields, the header has " +
                             std::to_string(header.size())});
      continue;
    }
    detail::ImportEntry entry;
    const fs::path clip = clips / fields[size_t(path_column)];
    entry.utterance.id = clip.stem().string();
    entry.utterance.audio_path = clip.lexically_normal().string();
    entry.utterance.transcript = fields[size_t(sentence_column)];
    entry.origin = {tsv_path, line_number, ""};
    any_mp3 = any_mp3 || clip.extension() == ".mp3";
    entries.push_back(std::move(entry));
  }
  if (any_mp3 && !libsndfile_reads_mpeg()) {
    MPIASR_FAIL(ExitCode::kBadInput,
                tsv_path << ": the clips are MP3, which this libsndfile (" << sf_version_string()
                         << ") cannot read: it was built without MPEG support (mpg123; Debian 12's "
                            "libsndfile1 has it). Convert the clips to FLAC or WAV (e.g. ffmpeg "
                            "-i X.mp3 X.flac) and change the TSV's path column to match.");
  }
  return detail::finish_import(tsv_path, std::move(entries), std::move(dropped));
}

}  // namespace mpiasr
