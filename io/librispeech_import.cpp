// The LibriSpeech importer: every <speaker>-<chapter>.trans.txt below the
// root, each line "<id> <TRANSCRIPT>" for the audio <id>.flac beside it; see
// corpus_import.h.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "io/corpus_import.h"
#include "src/base/error.h"

namespace mpiasr {

namespace fs = std::filesystem;

ImportReport import_librispeech(const std::string& root) {
  std::error_code error;
  if (!fs::is_directory(root, error)) {
    MPIASR_FAIL(ExitCode::kBadInput, "LibriSpeech folder '" << root << "': not found");
  }
  // Every transcript file and every FLAC file below the root, sorted.
  std::vector<fs::path> transcript_files;
  std::set<fs::path> flac_files;
  for (auto it =
           fs::recursive_directory_iterator(root, fs::directory_options::follow_directory_symlink);
       it != fs::recursive_directory_iterator(); ++it) {
    if (!it->is_regular_file()) continue;
    const std::string name = it->path().filename().string();
    if (name.ends_with(".trans.txt"))
      transcript_files.push_back(fs::absolute(it->path()).lexically_normal());
    if (it->path().extension() == ".flac")
      flac_files.insert(fs::absolute(it->path()).lexically_normal());
  }
  std::sort(transcript_files.begin(), transcript_files.end());
  if (transcript_files.empty()) {
    MPIASR_FAIL(ExitCode::kBadInput, "LibriSpeech folder '"
                                         << root
                                         << "': no *.trans.txt file below it (expected "
                                            "<speaker>/<chapter>/<speaker>-<chapter>.trans.txt)");
  }

  std::map<std::string, detail::ImportEntry> by_id;  // sorted by id
  std::vector<InputProblem> dropped;
  std::set<fs::path> transcribed;
  for (const fs::path& file : transcript_files) {
    std::ifstream in(file);
    if (!in) MPIASR_FAIL(ExitCode::kBadInput, file.string() << ": cannot open");
    int line_number = 0;
    for (std::string line; std::getline(in, line);) {
      ++line_number;
      if (!line.empty() && line.back() == '\r') line.pop_back();
      if (line.find_first_not_of(" \t") == std::string::npos) continue;
      const size_t space = line.find(' ');
      const InputProblem origin{file.string(), line_number, ""};
      if (space == 0 || space == std::string::npos) {
        dropped.push_back(
            {origin.file, line_number, "expected '<id> <TRANSCRIPT>', found '" + line + "'"});
        continue;
      }
      detail::ImportEntry entry;
      entry.utterance.id = line.substr(0, space);
      entry.utterance.transcript = line.substr(space + 1);
      const fs::path audio = file.parent_path() / (entry.utterance.id + ".flac");
      entry.utterance.audio_path = audio.string();
      entry.origin = origin;
      if (by_id.count(entry.utterance.id)) {
        dropped.push_back({origin.file, line_number,
                           "utterance " + entry.utterance.id + " appears again (first in " +
                               by_id[entry.utterance.id].origin.file + ")"});
        continue;
      }
      transcribed.insert(audio);
      by_id.emplace(entry.utterance.id, std::move(entry));
    }
  }
  for (const fs::path& flac : flac_files) {
    if (!transcribed.count(flac)) {
      dropped.push_back({flac.string(), 0,
                         "no transcript: no line for " + flac.stem().string() + " in " +
                             flac.parent_path().string() + "/*.trans.txt"});
    }
  }
  std::vector<detail::ImportEntry> entries;
  for (auto& [id, entry] : by_id) entries.push_back(std::move(entry));
  return detail::finish_import(root, std::move(entries), std::move(dropped));
}

}  // namespace mpiasr
