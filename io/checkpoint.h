// Checkpoint directories: atomic writes, checksums, retention and the search
// for the newest intact checkpoint (DESIGN.md "Checkpoint format", invariant 6).
//
// Layout under a root folder ROOT:
//   ROOT/step-NNNNNNNN/        one checkpoint (step zero-padded to 8 digits):
//       model.safetensors, optimizer.safetensors, config.yaml, ...  (the caller's files)
//       state.json             the caller's state, plus "files": {name: {"size": bytes,
//                              "crc32": "8 hex digits"}} for every other file; written last
//   ROOT/latest                "step-NNNNNNNN\n", the checkpoint written last
//   ROOT/best                  "step-NNNNNNNN\n", the best checkpoint, kept by retention
//   ROOT/.tmp-step-NNNNNNNN-PID/  a checkpoint being written (a crash leaves it behind;
//                              it is ignored and removed by the next write)
//
// Writing: files go into the temporary folder, each fsync'ed, then the folder
// is fsync'ed and renamed to step-NNNNNNNN, ROOT is fsync'ed, and the pointers
// are replaced atomically (write NAME.tmp, fsync, rename, fsync ROOT). A crash
// at any point leaves either the old or the new checkpoint complete.
// A checkpoint is intact when state.json parses and every file it lists has
// the listed size and CRC32.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace mpiasr {

struct CheckpointFiles {
  std::map<std::string, std::string> files;         // file name -> contents (not state.json)
  nlohmann::json state = nlohmann::json::object();  // the caller's state.json, without "files"
};

using CheckpointLog = std::function<void(const std::string&)>;

// ROOT/step-NNNNNNNN.
std::string checkpoint_dir(const std::string& root, int64_t step);

// Writes the checkpoint of `step` atomically (replacing one of the same step),
// points ROOT/latest at it, and ROOT/best at `best_step` when given (otherwise
// the existing best pointer stands). Then retention: keeps the `keep_last`
// newest steps up to `step` plus the best one, and deletes the rest, including
// steps newer than `step` (left by an abandoned run that was not resumed).
// Returns the checkpoint's folder. Errors have ExitCode::kCheckpoint.
std::string write_checkpoint(const std::string& root, int64_t step, const CheckpointFiles& contents,
                             int keep_last, std::optional<int64_t> best_step);

// The step of a folder named step-NNNNNNNN (8 to 18 digits), else nullopt.
std::optional<int64_t> parse_step_name(std::string_view name);

// Steps of the step-NNNNNNNN folders under ROOT, intact or not, ascending.
std::vector<int64_t> step_folders(const std::string& root);

// Parses DIR/state.json into `state`, with its "files" checksums (which are
// not verified here); returns what is wrong with it, or nullopt.
std::optional<std::string> read_checkpoint_state(const std::string& dir, nlohmann::json& state);

// Why the checkpoint folder `dir` is not intact, or nullopt when it is.
std::optional<std::string> checkpoint_problem(const std::string& dir);

// The newest intact step under ROOT, or nullopt when there is none; each newer
// checkpoint that is corrupt is reported to `log` with the reason.
std::optional<int64_t> find_latest_intact(const std::string& root, const CheckpointLog& log);

// Every intact step under ROOT, ascending; corrupt ones are reported to `log`.
std::vector<int64_t> list_intact_steps(const std::string& root, const CheckpointLog& log);

// Reads and verifies a checkpoint; throws Error (kCheckpoint) naming the file
// and the mismatch when it is not intact.
CheckpointFiles read_checkpoint(const std::string& root, int64_t step);

// The step a pointer file (ROOT/latest or ROOT/best) names, or nullopt when
// the file is absent. `name` is "latest" or "best".
std::optional<int64_t> read_checkpoint_pointer(const std::string& root, const std::string& name);

}  // namespace mpiasr
