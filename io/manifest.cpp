// Manifest readers (tsv, NeMo JSON lines, SpeechBrain CSV), path resolution and
// the sidecar cache of audio headers. See manifest.h for the formats.
#include "io/manifest.h"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "src/base/error.h"
#include "src/base/file.h"

namespace mpiasr {
namespace {

namespace fs = std::filesystem;

// What is wrong with one manifest line; caught by the reader, which records it.
struct LineError {
  std::string what;
};

std::string trim(std::string_view text) {
  const char* space = " \t\r\n\f\v";
  size_t begin = text.find_first_not_of(space);
  if (begin == std::string_view::npos) return "";
  size_t end = text.find_last_not_of(space);
  return std::string(text.substr(begin, end - begin + 1));
}

// The lines of a text, without line terminators ("\n" or "\r\n") and without a
// UTF-8 byte order mark at the start.
std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    lines.emplace_back(line);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
  }
  if (!lines.empty() && lines[0].starts_with("\xEF\xBB\xBF")) lines[0].erase(0, 3);
  return lines;
}

std::string read_manifest_file(const std::string& path) {
  require_readable_file(path, "manifest", ExitCode::kBadInput);
  return read_file(path, ExitCode::kBadInput);
}

std::string single_quoted(std::string_view text) {
  return "'" + std::string(text) + "'";
}

// Replaces "$name" and "${name}" (name: letters, digits, '_') from `variables`.
std::string substitute(const std::string& text,
                       const std::map<std::string, std::string>& variables) {
  std::string out;
  size_t i = 0;
  while (i < text.size()) {
    if (text[i] != '$') {
      out += text[i++];
      continue;
    }
    bool braced = i + 1 < text.size() && text[i + 1] == '{';
    size_t begin = i + (braced ? 2 : 1), end = begin;
    while (end < text.size() &&
           (std::isalnum(static_cast<unsigned char>(text[end])) || text[end] == '_'))
      ++end;
    if (end == begin || (braced && (end >= text.size() || text[end] != '}'))) {
      throw LineError{"bad variable reference in " + single_quoted(text) +
                      " (use $name or ${name})"};
    }
    std::string name = text.substr(begin, end - begin);
    auto found = variables.find(name);
    if (found == variables.end()) {
      std::string known;
      for (const auto& [key, value] : variables) known += (known.empty() ? "" : ", ") + key;
      throw LineError{"unknown variable $" + name + " in " + single_quoted(text) +
                      " (substitutions given: " + (known.empty() ? "none" : known) + ")"};
    }
    out += found->second;
    i = end + (braced ? 1 : 0);
  }
  return out;
}

// The audio path as used: variables substituted, relative paths taken from the manifest's folder.
std::string resolve_audio_path(const std::string& written, const fs::path& manifest_dir,
                               const ManifestOptions& options) {
  std::string path = substitute(written, options.substitutions);
  if (path.empty()) throw LineError{"empty audio path"};
  fs::path resolved(path);
  if (resolved.is_relative() && !manifest_dir.empty()) resolved = manifest_dir / resolved;
  return resolved.lexically_normal().string();
}

// A non-negative number of seconds written as text.
double parse_seconds(const std::string& text, const char* field) {
  double value = 0;
  std::string clean = trim(text);
  auto [end, error] = std::from_chars(clean.data(), clean.data() + clean.size(), value);
  if (clean.empty() || error != std::errc() || end != clean.data() + clean.size() ||
      !std::isfinite(value)) {
    throw LineError{std::string(field) + " " + single_quoted(text) + " is not a number"};
  }
  if (value < 0) throw LineError{std::string(field) + " " + clean + " is negative"};
  return value;
}

Utterance parse_tsv_line(const std::string& line, const fs::path& dir,
                         const ManifestOptions& options) {
  size_t tab = line.find('\t');
  if (tab == std::string::npos) throw LineError{"expected 'path<TAB>transcript', found no tab"};
  if (line.find('\t', tab + 1) != std::string::npos) {
    throw LineError{"expected 'path<TAB>transcript', found more than one tab"};
  }
  Utterance u;
  u.id = trim(std::string_view(line).substr(0, tab));
  u.audio_path = resolve_audio_path(u.id, dir, options);
  u.transcript = trim(std::string_view(line).substr(tab + 1));
  return u;
}

Utterance parse_nemo_line(const std::string& line, const fs::path& dir,
                          const ManifestOptions& options) {
  nlohmann::json object;
  try {
    object = nlohmann::json::parse(line);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range: 1e999
    throw LineError{std::string("invalid JSON (") + e.what() + ")"};
  }
  if (!object.is_object()) throw LineError{"expected a JSON object"};
  auto string_field = [&](const char* name) {
    auto found = object.find(name);
    if (found == object.end()) throw LineError{std::string("no \"") + name + "\" field"};
    if (!found->is_string()) throw LineError{std::string("\"") + name + "\" is not a string"};
    return found->get<std::string>();
  };
  auto seconds_field = [&](const char* name, double fallback) {
    auto found = object.find(name);
    if (found == object.end() || found->is_null()) return fallback;
    if (!found->is_number()) throw LineError{std::string("\"") + name + "\" is not a number"};
    double value = found->get<double>();
    if (!std::isfinite(value) || value < 0) {
      throw LineError{std::string("\"") + name + "\" " + found->dump() + " is negative"};
    }
    return value;
  };
  Utterance u;
  std::string written = string_field("audio_filepath");
  u.audio_path = resolve_audio_path(written, dir, options);
  u.transcript = trim(string_field("text"));
  u.offset = seconds_field("offset", 0);
  u.duration = seconds_field("duration", -1);
  if (object.contains("id")) {
    u.id = string_field("id");
  } else {
    std::ostringstream id;
    id << written;
    if (u.offset > 0) id << "@" << u.offset;
    u.id = id.str();
  }
  return u;
}

// The fields of one CSV row; '"' quotes a field, '""' is a quote inside one.
std::vector<std::string> split_csv_row(const std::string& line) {
  std::vector<std::string> fields(1);
  bool in_quotes = false;
  for (size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (in_quotes) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else if (c == '"') {
        in_quotes = false;
      } else {
        fields.back() += c;
      }
    } else if (c == '"') {
      in_quotes = true;
    } else if (c == ',') {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  if (in_quotes) throw LineError{"unterminated quoted field"};
  return fields;
}

// A CSV field, quoted when it holds a comma or a quote ("" inside quotes).
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char c : text) quoted += c == '"' ? std::string("\"\"") : std::string(1, c);
  return quoted + "\"";
}

// White space runs (tabs, newlines) as one space, ends trimmed.
std::string one_line(const std::string& text) {
  std::string out;
  for (char c : text) {
    const bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  if (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

std::string format_of(const std::string& path, const std::string& option) {
  if (option == "tsv") return "tsv";
  if (option == "nemo" || option == "json" || option == "jsonl") return "nemo";
  if (option == "speechbrain" || option == "csv") return "speechbrain";
  if (option != "auto") {
    MPIASR_FAIL(ExitCode::kBadInput, "manifest '" << path << "': unknown format '" << option
                                                  << "' (use auto, tsv, nemo or speechbrain)");
  }
  std::string ext = fs::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (ext == ".tsv" || ext == ".txt") return "tsv";
  if (ext == ".json" || ext == ".jsonl") return "nemo";
  if (ext == ".csv") return "speechbrain";
  MPIASR_FAIL(ExitCode::kBadInput, "manifest '"
                                       << path << "': cannot tell the format from the extension '"
                                       << ext << "' (name it .tsv, .txt, .json, .jsonl or .csv, "
                                       << "or set the format: tsv, nemo or speechbrain)");
}

void read_speechbrain(const std::vector<std::string>& lines, const fs::path& dir,
                      const ManifestOptions& options, Manifest& manifest) {
  size_t header_index = 0;
  while (header_index < lines.size() && trim(lines[header_index]).empty()) ++header_index;
  if (header_index == lines.size()) {
    MPIASR_FAIL(ExitCode::kBadInput, "manifest '" << manifest.path << "': no CSV header line");
  }
  std::vector<std::string> header;
  try {
    header = split_csv_row(lines[header_index]);
  } catch (const LineError& e) {
    MPIASR_FAIL(ExitCode::kBadInput,
                manifest.path << ":" << header_index + 1 << ": CSV header: " << e.what);
  }
  for (auto& name : header) name = trim(name);
  auto column = [&](const std::string& name) -> int {
    auto found = std::find(header.begin(), header.end(), name);
    return found == header.end() ? -1 : static_cast<int>(found - header.begin());
  };
  const int wav = column("wav"), wrd = column("wrd"), id = column("ID"),
            duration = column("duration");
  if (wav < 0 || wrd < 0) {
    MPIASR_FAIL(ExitCode::kBadInput,
                manifest.path << ":" << header_index + 1
                              << ": CSV header needs the columns 'wav' and 'wrd', found: "
                              << lines[header_index]);
  }
  for (size_t i = header_index + 1; i < lines.size(); ++i) {
    const int line_number = static_cast<int>(i + 1);
    if (trim(lines[i]).empty()) continue;
    try {
      std::vector<std::string> fields = split_csv_row(lines[i]);
      if (fields.size() != header.size()) {
        throw LineError{"has " + std::to_string(fields.size()) + " fields, the header has " +
                        std::to_string(header.size())};
      }
      Utterance u;
      u.audio_path = resolve_audio_path(trim(fields[wav]), dir, options);
      u.transcript = trim(fields[wrd]);
      u.id = id >= 0 ? trim(fields[id]) : trim(fields[wav]);
      if (duration >= 0) u.duration = parse_seconds(fields[duration], "duration");
      u.line = line_number;
      manifest.utterances.push_back(std::move(u));
    } catch (const LineError& e) {
      manifest.problems.push_back({manifest.path, line_number, e.what + ": " + lines[i]});
    }
  }
}

// Cache file lines: size, mtime, sample rate, channels, frames, format, note
// (AudioInfo::note, often empty), path (tab separated). A v1 line (no note)
// reads as having no path and is read again.
constexpr const char* kCacheHeader = "# mpiasr audio headers v2";

}  // namespace

std::string to_string(const InputProblem& problem) {
  std::ostringstream out;
  out << problem.file;
  if (problem.line > 0) out << ":" << problem.line;
  out << ": " << problem.what;
  return out.str();
}

Manifest read_manifest(const std::string& path, const ManifestOptions& options) {
  format_of(path, options.format);  // an unknown format is reported before the file is read
  return parse_manifest(read_manifest_file(path), path, options);
}

Manifest parse_manifest(std::string_view text, const std::string& path,
                        const ManifestOptions& options) {
  Manifest manifest;
  manifest.path = path;
  manifest.use_duration_cache = options.use_duration_cache;
  const std::string format = format_of(path, options.format);
  const std::vector<std::string> lines = split_lines(text);
  const fs::path dir = fs::path(path).parent_path();
  if (format == "speechbrain") {
    read_speechbrain(lines, dir, options, manifest);
    return manifest;
  }
  for (size_t i = 0; i < lines.size(); ++i) {
    const int line_number = static_cast<int>(i + 1);
    const std::string& line = lines[i];
    if (trim(line).empty()) continue;
    if (format == "tsv" && line.starts_with('#')) continue;
    try {
      Utterance u = format == "tsv" ? parse_tsv_line(line, dir, options)
                                    : parse_nemo_line(line, dir, options);
      u.line = line_number;
      manifest.utterances.push_back(std::move(u));
    } catch (const LineError& e) {
      manifest.problems.push_back({path, line_number, e.what + ": " + line});
    }
  }
  return manifest;
}

void write_manifest(const std::string& path, const std::vector<Utterance>& utterances) {
  const std::string format = format_of(path, "auto");
  std::ostringstream out;
  out << std::setprecision(17);
  const bool durations = std::all_of(utterances.begin(), utterances.end(),
                                     [](const Utterance& u) { return u.duration >= 0; });
  if (format == "speechbrain") out << (durations ? "ID,duration,wav,wrd\n" : "ID,wav,wrd\n");
  for (const Utterance& u : utterances) {
    if (format != "nemo" && u.offset > 0) {
      MPIASR_FAIL(ExitCode::kUsage, "manifest '" << path << "': utterance " << u.id
                                                 << " is a segment (offset " << u.offset
                                                 << " s); segments need a NeMo manifest (.jsonl)");
    }
    const std::string transcript = one_line(u.transcript);
    if (format == "tsv") {
      if (u.audio_path.find_first_of("\t\n") != std::string::npos) {
        MPIASR_FAIL(ExitCode::kUsage, "manifest '" << path << "': the audio path '" << u.audio_path
                                                   << "' holds a tab or a newline");
      }
      out << u.audio_path << '\t' << transcript << '\n';
    } else if (format == "nemo") {
      nlohmann::json line = {{"audio_filepath", u.audio_path}, {"text", transcript}};
      if (u.duration >= 0) line["duration"] = u.duration;
      if (u.offset > 0) line["offset"] = u.offset;
      if (!u.id.empty()) line["id"] = u.id;
      out << line.dump() << '\n';
    } else {
      out << csv_field(u.id.empty() ? u.audio_path : u.id) << ',';
      if (durations) out << u.duration << ',';
      out << csv_field(u.audio_path) << ',' << csv_field(transcript) << '\n';
    }
  }
  write_file_atomic(path, out.str(), ExitCode::kUsage);
}

AudioInfoCache::AudioInfoCache(const std::string& manifest_path, bool enabled)
    : cache_path_(manifest_path + ".durations"), enabled_(enabled) {
  if (!enabled_) return;
  std::ifstream in(cache_path_);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with('#')) continue;
    // Eight tab-separated fields; the path is last so it may hold anything but a newline.
    std::istringstream fields(line);
    Entry entry;
    std::string path;
    char separator = 0;
    if (!(fields >> entry.size >> entry.mtime >> entry.info.sample_rate >> entry.info.channels >>
          entry.info.frames)) {
      continue;
    }
    if (!fields.get(separator) || separator != '\t' ||
        !std::getline(fields, entry.info.format, '\t') ||
        !std::getline(fields, entry.info.note, '\t') || !std::getline(fields, path) || path.empty())
      continue;
    if (entry.info.sample_rate <= 0) continue;
    entry.info.duration = static_cast<double>(entry.info.frames) / entry.info.sample_rate;
    entries_[path] = std::move(entry);
  }
}

AudioInfo AudioInfoCache::lookup(const std::string& audio_path) {
  if (!enabled_) return read_audio_info(audio_path);
  std::error_code size_error, time_error;
  const uintmax_t size = fs::file_size(audio_path, size_error);
  const auto mtime = fs::last_write_time(audio_path, time_error);
  if (size_error || time_error) return read_audio_info(audio_path);  // it names what is wrong
  const std::string key = fs::absolute(audio_path).lexically_normal().string();
  const int64_t ticks = mtime.time_since_epoch().count();
  {
    std::lock_guard lock(mutex_);
    auto found = entries_.find(key);
    if (found != entries_.end() && found->second.size == size && found->second.mtime == ticks) {
      return found->second.info;
    }
  }
  AudioInfo info = read_audio_info(audio_path);
  std::lock_guard lock(mutex_);
  entries_[key] = Entry{size, ticks, info};
  changed_ = true;
  return info;
}

std::optional<std::string> AudioInfoCache::save() {
  std::lock_guard lock(mutex_);
  if (!enabled_ || !changed_) return std::nullopt;
  const auto cannot = [&](int error) {
    return "cannot write its duration cache '" + cache_path_ + "' (" + file_error_text(error) +
           "): every run reads the audio headers again";
  };
  std::vector<const std::pair<const std::string, Entry>*> sorted;
  for (const auto& entry : entries_) sorted.push_back(&entry);
  std::sort(sorted.begin(), sorted.end(), [](auto* a, auto* b) { return a->first < b->first; });
  const std::string temporary = cache_path_ + ".tmp." + std::to_string(getpid());
  {
    std::ofstream out(temporary, std::ios::trunc);
    if (!out) return cannot(errno);
    out << kCacheHeader << "\n";
    for (const auto* entry : sorted) {
      const Entry& e = entry->second;
      out << e.size << '\t' << e.mtime << '\t' << e.info.sample_rate << '\t' << e.info.channels
          << '\t' << e.info.frames << '\t' << e.info.format << '\t' << e.info.note << '\t'
          << entry->first << '\n';
    }
    out.flush();
    if (!out) {
      const int error = errno;
      out.close();
      std::error_code ignored;
      fs::remove(temporary, ignored);
      return cannot(error);
    }
  }
  std::error_code error;
  fs::rename(temporary, cache_path_, error);
  if (error) {
    std::error_code ignored;
    fs::remove(temporary, ignored);
    return cannot(error.value());
  }
  changed_ = false;
  return std::nullopt;
}

}  // namespace mpiasr
