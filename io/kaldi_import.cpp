// The Kaldi data directory importer: wav.scp, text and optionally segments;
// see corpus_import.h.
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
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

  // Recordings: files only. A command ("... |") or an archive offset is
  // refused: each utterance of it is dropped, naming its wav.scp line.
  std::map<std::string, TableLine> recordings, refused;
  for (TableLine& line : read_table(wav_scp, dropped)) {
    const std::string& value = line.rest;
    const size_t colon = value.rfind(':');
    const bool archive = colon != std::string::npos && colon + 1 < value.size() &&
                         value.find_first_not_of("0123456789", colon + 1) == std::string::npos;
    if (!value.empty() && (value.back() == '|' || archive)) {
      line.rest = std::string(archive ? "an archive offset" : "a command") + " ('" + value +
                  "'), which mpiasr does not run: write its audio to a file and list that";
      refused.emplace(line.key, std::move(line));
      continue;
    }
    if (value.empty()) {
      dropped.push_back({wav_scp, line.line, "recording " + line.key + " has no path"});
      continue;
    }
    line.rest = fs::absolute(value).lexically_normal().string();
    recordings.emplace(line.key, std::move(line));
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
  std::map<std::string, bool> used;    // utterances (segments) or recordings with a transcript
  std::set<std::string> refused_used;  // refused recordings an utterance names
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
    if (auto bad = refused.find(recording); bad != refused.end()) {
      refused_used.insert(recording);
      dropped.push_back({text, line.line,
                         "recording " + recording + " (" + wav_scp + ":" +
                             std::to_string(bad->second.line) + ") is " + bad->second.rest});
      continue;
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
  // A refused recording no utterance names is still a fault of wav.scp.
  for (const auto& [recording, line] : refused) {
    if (!refused_used.count(recording)) {
      dropped.push_back({wav_scp, line.line, "recording " + recording + " is " + line.rest});
    }
  }
  return detail::finish_import(data_dir, std::move(entries), std::move(dropped));
}

}  // namespace mpiasr
