// The metrics file: one JSON object per line, written by world rank 0, each
// line by one write(2), so a crash loses nothing already logged.
//
//   {"kind":"train","step":120,"epoch":1.37,"loss":0.84,"lr":0.0012,"grad_norm":2.3,
//    "utt_per_s":41.2,"audio_s_per_s":160.5,"elapsed_s":95.2}
//   {"kind":"valid","step":500,"loss":0.61,"cer":0.082,"wer":0.231,"elapsed_s":402.7}
//   {"kind":"timeline","step":120,"ranks":[{"rank":0,"step_ms":702.1,...},...]}
// (timeline lines with output.timeline, DESIGN.md "The step's timeline").
// elapsed_s is the wall time trained when the line was written, earlier runs
// of a resumed training included (what training.max_minutes limits).
//
// A run that starts at step S (0 for a fresh run, the checkpoint's step on
// resume) first drops the lines of steps after S: those steps are about to be
// trained again, and their lines come back from the resumed run.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "src/base/file.h"

namespace mpiasr {

class MetricsLog {
 public:
  // enabled = false (ranks other than 0): writes nothing and touches no file.
  // A file that cannot be written throws Error(kUsage) naming it and why.
  MetricsLog(const std::string& path, bool enabled, int64_t start_step);

  void write(const nlohmann::json& record);

 private:
  std::string path_;
  FileDescriptor file_;  // none (-1) when not enabled
};

}  // namespace mpiasr
