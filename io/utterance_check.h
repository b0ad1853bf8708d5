// Bad-input validation of a manifest before training starts: every problem
// with every utterance is found in one pass, so a user fixes them all at once.
//
// Checked for each utterance (each failure is one InputProblem at the
// utterance's manifest line):
//   manifest line   could not be parsed (Manifest::problems)
//   transcript      empty; not valid UTF-8
//   audio header    file missing; unsupported format; corrupt header; no samples;
//                   truncated (a file cut short, or a header claiming more data
//                   than the file holds: both lengths are named)
//   segment         offset past the end of the file; zero length
//   samples         NaN or infinite samples, truncated data (check_samples: every sample
//                   of the segment is decoded, on `threads` threads)
//
// Durations still unknown (< 0) are filled from the audio headers, through the
// manifest's sidecar cache (AudioInfoCache). A segment whose offset + duration
// ends past the end of its file (by more than kSegmentEndTolerance) is clipped
// to the end of the file and reported as a warning: NeMo reads such a segment
// the same way (to the end of the file), so manifests made for it train the
// same here, and a clip that leaves too little audio for the transcript is
// caught by the length check like any short utterance. A WAV with data past
// its data chunk (AudioInfo::note) is kept, read as far as its header says,
// with a warning naming both lengths.
//
// Policy: by default any problem throws Error(kBadInput) whose message lists
// every problem as "file:line: what". With skip_bad, the bad utterances are
// removed from the manifest and the report says how many and which; a manifest
// left with no utterance still throws, unless allow_empty. Truncated audio is
// such a problem, not a warning: its transcript covers words the file no
// longer holds. Characters outside the model's vocabulary are not checked
// here: the tokenizer drops them and reports how many (io/tokenizer.h).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "io/manifest.h"

namespace mpiasr {

struct ValidationOptions {
  bool skip_bad = false;
  bool check_samples = true;
  bool require_transcript = true;  // false: empty transcripts are fine (transcribe)
  bool allow_empty = false;        // with skip_bad: no utterance left is no error
  int threads = 0;                 // 0 = one per hardware thread
};

struct ValidationReport {
  std::vector<InputProblem> problems;
  // Kept utterances, changed (segments clipped) or odd (data past a WAV's
  // data chunk), then line 0: the manifest's duration cache not written.
  std::vector<InputProblem> warnings;
  size_t kept = 0, dropped = 0;
  // "kept K of N utterances, dropped D:" and one "file:line: what" line per problem.
  std::string summary() const;
};

ValidationReport validate_manifest(Manifest& manifest, const ValidationOptions& options);

}  // namespace mpiasr
