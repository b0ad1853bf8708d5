// The file helpers of file.h, on POSIX descriptors (fsync needs one).
#include "src/base/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

namespace mpiasr {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail_errno(ExitCode code, const std::string& what, const std::string& path) {
  MPIASR_FAIL(code, "cannot " << what << " " << path << ": " << file_error_text(errno));
}

}  // namespace

FileDescriptor& FileDescriptor::operator=(FileDescriptor&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

FileDescriptor::~FileDescriptor() {
  if (fd_ >= 0) ::close(fd_);
}

int FileDescriptor::close() {
  const int rc = ::close(fd_);
  fd_ = -1;
  return rc;
}

std::string file_error_text(int error) {
  switch (error) {
    case ENOENT:
      return "file not found";
    case EACCES:
    case EPERM:
      return "permission denied";
    case ELOOP:
      return "a symbolic link loop (too many levels of symbolic links)";
    case EISDIR:
      return "is a folder, not a file";
    case ENOTDIR:
      return "a part of the path is not a folder";
    case ENAMETOOLONG:
      return "the path is too long";
    case ENOSPC:
      return "no space left on the device";
    case EDQUOT:
      return "disk quota exceeded";
    case EROFS:
      return "read-only filesystem";
    case EEXIST:
      return "exists already, and is not a folder";
    case EIO:
      return "input/output error (a failing disk or network filesystem)";
    default:
      return std::strerror(error);
  }
}

void fail_file(ExitCode code, const std::string& what, const std::string& path, int error) {
  MPIASR_FAIL(code, what << " '" << path << "': " << file_error_text(error));
}

FileDescriptor open_file(const std::string& path, int flags, ExitCode code) {
  FileDescriptor fd(::open(path.c_str(), flags | O_CLOEXEC, 0644));
  if (fd.get() < 0) fail_errno(code, (flags & O_CREAT) ? "create" : "open", path);
  return fd;
}

void require_readable_file(const std::string& path, const std::string& what, ExitCode code) {
  struct stat status {};
  if (::stat(path.c_str(), &status) != 0) fail_file(code, what, path, errno);
  if (S_ISDIR(status.st_mode)) fail_file(code, what, path, EISDIR);
  if (!S_ISREG(status.st_mode)) {
    MPIASR_FAIL(code, what << " '" << path << "': not a regular file (a device, pipe or socket)");
  }
  FileDescriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) fail_file(code, what, path, errno);
}

void make_folders(const std::string& dir, const std::string& what, ExitCode code) {
  std::error_code error;
  fs::create_directories(dir, error);
  if (error) {
    MPIASR_FAIL(code, what << " '" << dir
                           << "': cannot create the folder: " << file_error_text(error.value()));
  }
}

void fsync_dir(const std::string& dir, ExitCode code) {
  FileDescriptor fd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() < 0) fail_errno(code, "open folder", dir);
  if (::fsync(fd.get()) != 0) fail_errno(code, "fsync folder", dir);
}

void rename_path(const std::string& from, const std::string& to, ExitCode code) {
  if (std::rename(from.c_str(), to.c_str()) != 0) fail_errno(code, "rename to " + to + ":", from);
}

std::string read_file(const std::string& path, ExitCode code) {
  const FileDescriptor fd = open_file(path, O_RDONLY, code);
  std::string bytes;
  std::error_code error;
  auto size = fs::file_size(path, error);
  if (!error) bytes.reserve(size);
  char buffer[1 << 16];
  while (true) {
    ssize_t got = ::read(fd.get(), buffer, sizeof buffer);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail_errno(code, "read", path);
    if (got == 0) break;
    bytes.append(buffer, static_cast<size_t>(got));
  }
  return bytes;
}

void write_all(const FileDescriptor& fd, std::string_view bytes, const std::string& path,
               ExitCode code) {
  while (!bytes.empty()) {
    ssize_t wrote = ::write(fd.get(), bytes.data(), bytes.size());
    if (wrote < 0 && errno == EINTR) continue;
    if (wrote < 0) fail_errno(code, "write", path);
    bytes.remove_prefix(static_cast<size_t>(wrote));
  }
}

void write_file(const std::string& path, std::string_view bytes, ExitCode code) {
  FileDescriptor fd = open_file(path, O_WRONLY | O_CREAT | O_TRUNC, code);
  write_all(fd, bytes, path, code);
  if (fd.close() != 0) fail_errno(code, "close", path);
}

void write_file_synced(const std::string& path, std::string_view bytes, ExitCode code) {
  FileDescriptor fd = open_file(path, O_WRONLY | O_CREAT | O_TRUNC, code);
  write_all(fd, bytes, path, code);
  if (::fsync(fd.get()) != 0) fail_errno(code, "fsync", path);
  if (fd.close() != 0) fail_errno(code, "close", path);
}

void write_file_atomic(const std::string& path, std::string_view bytes, ExitCode code) {
  // A device, a pipe or a link to one (--out /dev/stdout) is written as it
  // is: renaming a file over it would replace the entry itself (as root,
  // /dev/stdout).
  struct stat target;
  if (::stat(path.c_str(), &target) == 0 && !S_ISREG(target.st_mode)) {
    write_file(path, bytes, code);
    return;
  }
  std::string tmp = path + ".tmp";
  write_file_synced(tmp, bytes, code);
  rename_path(tmp, path, code);
  std::string parent = fs::path(path).parent_path().string();
  fsync_dir(parent.empty() ? "." : parent, code);
}

}  // namespace mpiasr
