// The Kaldi data directory importer: wav.scp, text and optionally segments;
// see corpus_import.h.
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "io/corpus_import.h"
#include "src/base/error.h"

namespace mpiasr {

namespace fs = std::filesystem;

namespace {

// One "<key> <rest>" line of a Kaldi table file.
struct TableLine {
  std::string key, rest;
  int line = 0;
};

std::string trim(const std::string& text) {
  const size_t begin = text.find_first_not_of(" \t\r");
  if (begin == std::string::npos) return "";
  return text.substr(begin, text.find_last_not_of(" \t\r") - begin + 1);
}

// The lines of a table file in order; blank lines are skipped. A key seen
// again is dropped with its line.
std::vector<TableLine> read_table(const std::string& path, std::vector<InputProblem>& dropped) {
  std::ifstream in(path, std::ios::binary);
  if (!in) MPIASR_FAIL(ExitCode::kBadInput, "Kaldi data: '" << path << "': cannot open");
  std::vector<TableLine> lines;
  std::map<std::string, int> first_line;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    line = trim(line);
    if (line.empty()) continue;
    const size_t space = line.find_first_of(" \t");
    TableLine entry{line.substr(0, space),
                    space == std::string::npos ? "" : trim(line.substr(space)), number};
    auto [it, inserted] = first_line.emplace(entry.key, number);
    if (!inserted) {
      dropped.push_back(
          {path, number,
           "'" + entry.key + "' appears again (first on line " + std::to_string(it->second) + ")"});
      continue;
    }
    lines.push_back(std::move(entry));
  }
  return lines;
}

bool parse_seconds(const std::string& text, double& value) {
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  return error == std::errc() && end == text.data() + text.size() && std::isfinite(value);
}

}  // namespace

ImportReport import_kaldi(const std::string& data_dir) {
  std::error_code error;
  const fs::path dir(data_dir);
  if (!fs::is_directory(dir, error)) {
    MPIASR_FAIL(ExitCode::kBadInput, "Kaldi data directory '" << data_dir << "': not found");
  }
  for (const char* needed : {"wav.scp", "text"}) {
    if (!fs::exists(dir / needed, error)) {
      MPIASR_FAIL(ExitCode::kBadInput, "Kaldi data directory '" << data_dir << "': no " << needed);
    }
  }
  const std::string wav_scp = (dir / "wav.scp").string(), text = (dir / "text").string(),
                    segments_file = (dir / "segments").string();
  const bool has_segments = fs::exists(segments_file, error);
  std::vector<InputProblem> dropped;

  // Recordings: files only; commands and archive offsets stop the import.
  std::map<std::string, TableLine> recordings;
  std::vector<std::string> commands;
  for (TableLine& line : read_table(wav_scp, dropped)) {
    const std::string& value = line.rest;
    const size_t colon = value.rfind(':');
    const bool archive = colon != std::string::npos && colon + 1 < value.size() &&
                         value.find_first_not_of("0123456789", colon + 1) == std::string::npos;
    if (!value.empty() && (value.back() == '|' || archive)) {
      commands.push_back(wav_scp + ":" + std::to_string(line.line) + ": '" + value + "'");
      continue;
    }
    if (value.empty()) {
      dropped.push_back({wav_scp, line.line, "recording " + line.key + " has no path"});
      continue;
    }
    line.rest = fs::absolute(value).lexically_normal().string();
    recordings.emplace(line.key, std::move(line));
  }
  if (!commands.empty()) {
    std::ostringstream list;
    for (size_t i = 0; i < commands.size() && i < 10; ++i) list << "\n  " << commands[i];
    if (commands.size() > 10) list << "\n  ... and " << commands.size() - 10 << " more";
    MPIASR_FAIL(ExitCode::kBadInput,
                wav_scp << ": " << commands.size()
                        << " entries are commands or archive offsets, which mpiasr does not run; "
                           "write the audio to files first (e.g. run each command into a .wav or "
                           ".flac file and list those):"
                        << list.str());
  }

  // Segments: utterance -> (recording, start, end).
  struct Segment {
    std::string recording;
    double start = 0, end = -1;
    int line = 0;
  };
  std::map<std::string, Segment> segments;
  if (has_segments) {
    for (const TableLine& line : read_table(segments_file, dropped)) {
      std::istringstream fields(line.rest);
      std::string recording, start_text, end_text, extra;
      Segment segment;
      segment.line = line.line;
      if (!(fields >> recording >> start_text >> end_text) || (fields >> extra) ||
          !parse_seconds(start_text, segment.start) || !parse_seconds(end_text, segment.end) ||
          segment.start < 0 || (segment.end != -1 && segment.end <= segment.start)) {
        dropped.push_back({segments_file, line.line,
                           "expected '<utterance> <recording> <start> <end>' with 0 <= start < "
                           "end (or end -1), found '" +
                               line.key + " " + line.rest + "'"});
        continue;
      }
      segment.recording = recording;
      segments.emplace(line.key, std::move(segment));
    }
  }

  std::vector<detail::ImportEntry> entries;
  std::map<std::string, bool> used;  // utterances (segments) or recordings with a transcript
  for (const TableLine& line : read_table(text, dropped)) {
    detail::ImportEntry entry;
    entry.origin = {text, line.line, ""};
    entry.utterance.id = line.key;
    entry.utterance.transcript = line.rest;
    std::string recording = line.key;
    if (has_segments) {
      auto segment = segments.find(line.key);
      if (segment == segments.end()) {
        dropped.push_back(
            {text, line.line, "utterance " + line.key + " is not in " + segments_file});
        continue;
      }
      used[line.key] = true;
      recording = segment->second.recording;
      entry.utterance.offset = segment->second.start;
      if (segment->second.end != -1) {
        entry.utterance.duration = segment->second.end - segment->second.start;
      }
    }
    auto found = recordings.find(recording);
    if (found == recordings.end()) {
      dropped.push_back({text, line.line, "recording " + recording + " is not in " + wav_scp});
      continue;
    }
    if (!has_segments) used[recording] = true;
    entry.utterance.audio_path = found->second.rest;
    entries.push_back(std::move(entry));
  }
  // What has no transcript.
  if (has_segments) {
    for (const auto& [utterance, segment] : segments) {
      if (!used.count(utterance)) {
        dropped.push_back(
            {segments_file, segment.line, "utterance " + utterance + " has no line in " + text});
      }
    }
  } else {
    for (const auto& [recording, line] : recordings) {
      if (!used.count(recording)) {
        dropped.push_back(
            {wav_scp, line.line, "recording " + recording + " has no line in " + text});
      }
    }
  }
  return detail::finish_import(data_dir, std::move(entries), std::move(dropped));
}

}  // namespace mpiasr
