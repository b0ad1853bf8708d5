// Small file helpers: read a whole file, write one durably (fsync), replace
// one atomically (temporary file, fsync, rename, fsync of the folder), fsync a
// folder. Failures throw Error with the exit code given (kCheckpoint by
// default: what the program writes durably is checkpoints and the files
// that go with them), naming the operation, the path and errno's text.
#pragma once

#include <string>
#include <string_view>

#include "src/base/error.h"

namespace mpiasr {

// A file's complete contents.
std::string read_file(const std::string& path, ExitCode code = ExitCode::kCheckpoint);
// Writes `bytes` to `path` and fsyncs it (not its folder).
void write_file_synced(const std::string& path, std::string_view bytes,
                       ExitCode code = ExitCode::kCheckpoint);
// Writes to PATH.tmp, fsyncs, renames over PATH and fsyncs the folder.
void write_file_atomic(const std::string& path, std::string_view bytes,
                       ExitCode code = ExitCode::kCheckpoint);
// fsyncs the folder itself, so that renames and new entries in it are durable.
void fsync_dir(const std::string& dir, ExitCode code = ExitCode::kCheckpoint);
// Renames `from` to `to` (replacing it).
void rename_path(const std::string& from, const std::string& to,
                 ExitCode code = ExitCode::kCheckpoint);

}  // namespace mpiasr
