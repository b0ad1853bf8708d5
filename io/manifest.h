// Manifests: the list of utterances (audio file, transcript) a run trains or
// evaluates on, in the three formats ASR toolkits write.
//
//   tsv          path<TAB>transcript            '#' lines and blank lines are ignored
//   nemo         one JSON object per line: {"audio_filepath": ..., "text": ...,
//                "duration": seconds (optional), "offset": seconds (optional),
//                "id": the utterance's name (optional)}
//   speechbrain  CSV with a header naming the columns: wav and wrd (needed), ID and
//                duration in seconds (optional); fields may be "quoted" ("" is a quote
//                inside a quoted field) but cannot span lines
//
// The format comes from ManifestOptions::format or, for "auto", from the
// extension: .tsv .txt -> tsv, .json .jsonl -> nemo, .csv -> speechbrain.
// Audio paths may name variables, "$name" or "${name}", replaced from
// ManifestOptions::substitutions (SpeechBrain's "$data_root/..."); relative paths
// are then resolved against the manifest's folder. Every utterance keeps its
// line number in the manifest (1-based).
//
// A line that cannot be parsed does not stop reading: it is recorded in
// Manifest::problems, and validate_manifest (io/utterance_check.h) reports it
// with every other problem. A missing or unreadable manifest, an unknown format
// or a CSV header without the needed columns throws Error(kBadInput).
//
// Durations missing from the manifest are read from the audio headers when
// the manifest is validated (validate_manifest, io/utterance_check.h) and
// cached next to the manifest in "<manifest>.durations":
// one line "size<TAB>mtime<TAB>sample_rate<TAB>channels<TAB>frames<TAB>format<TAB>note<TAB>path"
// per audio file (note: AudioInfo::note), so a file whose size or
// modification time changed is read again. A cache that cannot be written
// is skipped, with a warning (validate_manifest).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "io/audio.h"

namespace mpiasr {

struct Utterance {
  std::string id;
  std::string audio_path;  // resolved: substitutions applied, relative to the manifest's folder
  std::string transcript;  // leading and trailing white space removed
  double offset = 0;       // seconds into the audio file
  double duration = -1;    // seconds; -1 = not known yet (validate_manifest)
  int line = 0;            // 1-based line in the manifest
};

// One thing wrong with the input: the manifest file, its line (0 for the file
// as a whole) and what is wrong.
struct InputProblem {
  std::string file;
  int line = 0;
  std::string what;
};

// "file:line: what" ("file: what" for line 0).
std::string to_string(const InputProblem& problem);

struct ManifestOptions {
  std::string format = "auto";  // auto, tsv, nemo (or json), speechbrain (or csv)
  std::map<std::string, std::string> substitutions;
  bool use_duration_cache = true;
};

struct Manifest {
  std::string path;
  std::vector<Utterance> utterances;
  std::vector<InputProblem> problems;  // lines that could not be parsed
  bool use_duration_cache = true;
};

Manifest read_manifest(const std::string& path, const ManifestOptions& options = {});

// The manifest whose contents are `text`, as if read from `path` (which
// gives the format for "auto", the folder of relative audio paths and the
// name in problems); nothing is read from disk.
Manifest parse_manifest(std::string_view text, const std::string& path,
                        const ManifestOptions& options = {});

// Writes utterances as a manifest in the format of the path's extension, as
// read_manifest would tell it (.tsv .txt, .json .jsonl, .csv): tsv writes the
// audio path and the transcript; nemo also the duration (when known), the
// offset (when not 0) and the id; speechbrain the columns ID, duration, wav,
// wrd. Segments (an offset or a duration inside a file) need nemo: tsv and
// speechbrain cannot hold an offset, and throw Error(kUsage) for one. White
// space runs in transcripts are written as one space. Audio paths are written
// as they are (make them absolute, or relative to the manifest's folder). The
// file is written atomically; Error(kUsage) names why it cannot be.
void write_manifest(const std::string& path, const std::vector<Utterance>& utterances);

// The headers of a manifest's audio files, read once and kept in the sidecar
// file "<manifest>.durations". Safe to call from several threads.
class AudioInfoCache {
 public:
  // Loads the sidecar file of `manifest_path` when `enabled` (a missing or
  // unreadable sidecar is an empty cache).
  AudioInfoCache(const std::string& manifest_path, bool enabled);
  // The header of `audio_path`: from the cache when its size and modification
  // time match, else read (read_audio_info; throws Error(kBadInput)) and remembered.
  AudioInfo lookup(const std::string& audio_path);
  // Writes the sidecar file if anything new was read (atomically: temporary
  // file, then rename). Does nothing when disabled; returns why it could not
  // be written (a read-only folder, ...), which is no error: the headers are
  // read again next time.
  std::optional<std::string> save();

 private:
  struct Entry {
    uintmax_t size = 0;
    int64_t mtime = 0;  // file_time_type ticks
    AudioInfo info;
  };
  std::string cache_path_;
  bool enabled_;
  bool changed_ = false;
  std::mutex mutex_;
  std::unordered_map<std::string, Entry> entries_;
};

}  // namespace mpiasr
