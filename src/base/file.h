// Small file helpers: read a whole file, write one durably (fsync), replace
// one atomically (temporary file, fsync, rename, fsync of the folder), fsync a
// folder, check that a file can be read, make a folder. Failures throw Error
// with the exit code given (kCheckpoint by default: what the program writes
// durably is checkpoints and the files that go with them), naming the
// operation, the path and what the error means (file_error_text).
//
// Every filesystem error the program reports goes through file_error_text,
// so a symlink loop is not "file not found" and a permission problem is not
// "corrupt header": the exit code says whose file it is (2 config and output
// folders, 3 input data, 4 checkpoints), the text what is wrong with it.
#pragma once

#include <string>
#include <string_view>

#include "src/base/error.h"

namespace mpiasr {

// What errno value `error` means for a path, in words: "file not found",
// "permission denied", "a symbolic link loop", "is a folder, not a file", ...
// (strerror's text for the rarer ones).
std::string file_error_text(int error);

// Throws Error(code): "<what> '<path>': <file_error_text(error)>".
[[noreturn]] void fail_file(ExitCode code, const std::string& what, const std::string& path,
                            int error);

// Checks that `path` is a regular file this process may read (following
// symbolic links); throws Error(code) naming `what` ("audio file", "config
// file", ...) and the problem otherwise. A FIFO or a device is refused
// without being opened.
void require_readable_file(const std::string& path, const std::string& what, ExitCode code);

// Creates the folder `dir` and its parents (mkdir -p); throws Error(code)
// naming `what` ("output.dir", ...) and the problem when it cannot.
void make_folders(const std::string& dir, const std::string& what, ExitCode code);

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
