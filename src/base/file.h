// Small file helpers: read a whole file, write one (plainly, or durably with
// fsync), replace one atomically (temporary file, fsync, rename, fsync of the
// folder), append to one, fsync a folder, check that a file can be read, make
// a folder. Failures throw Error with the exit code given (kCheckpoint by
// default: what the program writes durably is checkpoints and the files that
// go with them), naming the operation, the path and what the error means
// (file_error_text).
//
// Every filesystem error the program reports goes through file_error_text,
// so a symlink loop is not "file not found" and a permission problem is not
// "corrupt header": the exit code says whose file it is (2 config and output
// files and folders, 3 input data, 4 checkpoints), the text what is wrong
// with it (read-only filesystem, no space left, permission denied, ...).
#pragma once

#include <string>
#include <string_view>

#include "src/base/error.h"

namespace mpiasr {

// An open file descriptor (or none, -1), closed when it goes out of scope.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd = -1) : fd_(fd) {}
  FileDescriptor(FileDescriptor&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  FileDescriptor& operator=(FileDescriptor&& other) noexcept;
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor();
  int get() const { return fd_; }
  // Closes now and returns what close() returns (lost writes on NFS show there).
  int close();

 private:
  int fd_;
};

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
// Writes `bytes` to `path` (created, or emptied first), without fsync: for
// what a user may send to a device or a pipe (--out /dev/stdout).
void write_file(const std::string& path, std::string_view bytes, ExitCode code);
// Writes `bytes` to `path` and fsyncs it (not its folder).
void write_file_synced(const std::string& path, std::string_view bytes,
                       ExitCode code = ExitCode::kCheckpoint);
// Writes to PATH.tmp, fsyncs, renames over PATH and fsyncs the folder;
// where PATH is a device or a pipe (or a link to one), writes it as write_file
// does instead.
void write_file_atomic(const std::string& path, std::string_view bytes,
                       ExitCode code = ExitCode::kCheckpoint);
// fsyncs the folder itself, so that renames and new entries in it are durable.
void fsync_dir(const std::string& dir, ExitCode code = ExitCode::kCheckpoint);
// Renames `from` to `to` (replacing it).
void rename_path(const std::string& from, const std::string& to,
                 ExitCode code = ExitCode::kCheckpoint);

// Opens `path` with open(2)'s `flags` (O_CLOEXEC added; a file O_CREAT
// makes gets mode 0644).
FileDescriptor open_file(const std::string& path, int flags, ExitCode code);
// Writes all of `bytes` to `fd`, the open file `path`.
void write_all(const FileDescriptor& fd, std::string_view bytes, const std::string& path,
               ExitCode code);

}  // namespace mpiasr
