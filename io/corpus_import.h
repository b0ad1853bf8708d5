// Importers: the utterances of a corpus in a toolkit's layout, ready to be
// written as an mpiasr manifest (write_manifest, io/manifest.h).
//
//   LibriSpeech   ROOT/<speaker>/<chapter>/<speaker>-<chapter>.trans.txt, one
//                 "<id> <TRANSCRIPT>" line per utterance, audio <id>.flac next to it
//                 (ROOT may be any folder above the speakers, e.g. LibriSpeech/ or
//                 LibriSpeech/train-clean-100/; every .trans.txt below it is read)
//   Common Voice  a release's TSV (train.tsv, dev.tsv, validated.tsv, ...) whose
//                 header names the columns "path" and "sentence"; clips in the
//                 folder "clips" next to the TSV. The clips are MP3, which
//                 libsndfile reads when built with mpg123 (Debian 12's is);
//                 otherwise the import stops with a message saying so.
//   Kaldi         a data directory: wav.scp ("<recording> <path>"), text
//                 ("<utterance> <transcript>") and optionally segments
//                 ("<utterance> <recording> <start s> <end s>", end -1 = to the end
//                 of the file; without segments the recording is the utterance).
//                 wav.scp entries that are commands ("... |") or archive
//                 offsets ("file.ark:123") are refused, since mpiasr runs no
//                 shell: each utterance of one is dropped, naming the wav.scp
//                 line (convert the audio to files first). Relative paths are
//                 taken from the current directory, as Kaldi does.
//
// Every entry is checked as a manifest line is (validate_manifest: audio
// header readable, segment inside the file, transcript not empty after
// normalize_text), audio headers read in parallel. Entries that fail are
// dropped and listed with their reason, as "file:line: what" (line 0 for an
// audio file without a transcript line), in file and line order. Audio paths become absolute; kept
// utterances are in a stable order (sorted by id for LibriSpeech, the
// file's order otherwise) and carry their durations. Transcripts are kept as
// written; training normalizes them as the tokenizer config says.
//
// A missing source, or one with nothing usable, throws Error(kBadInput).
#pragma once

#include <string>
#include <vector>

#include "io/manifest.h"

namespace mpiasr {

struct ImportReport {
  std::vector<Utterance> utterances;   // kept
  std::vector<InputProblem> dropped;   // one per dropped entry, with its reason
  std::vector<InputProblem> warnings;  // kept entries, changed: segments clipped to their file
  size_t entries = 0;                  // kept + dropped
  double seconds = 0;                  // audio kept

  // "kept K of N entries (H h of audio), dropped D:" then one line per dropped
  // entry, then one "warning: " line per warning.
  std::string summary() const;
};

ImportReport import_librispeech(const std::string& root);
ImportReport import_common_voice(const std::string& tsv_path);
ImportReport import_kaldi(const std::string& data_dir);

// Whether this libsndfile decodes MPEG audio (MP3).
bool libsndfile_reads_mpeg();

namespace detail {

// Where an entry came from, for its report line.
struct ImportEntry {
  Utterance utterance;
  InputProblem origin;  // file and line; `what` unused
};

// Checks the entries (validate_manifest, skipping bad ones) and reports the
// kept and the dropped, adding the problems found before (`dropped`, e.g.
// lines that did not parse). `source` names the corpus in errors.
ImportReport finish_import(const std::string& source, std::vector<ImportEntry> entries,
                           std::vector<InputProblem> dropped);

}  // namespace detail

}  // namespace mpiasr
