// The lock file of lock_file.h: flock(2), and the holder's record read and
// written through the locked descriptor.
#include "src/base/lock_file.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <ctime>
#include <sstream>

namespace mpiasr {

namespace {

// The current local time as "2026-12-04 23:44:10 +0100".
std::string local_time_now() {
  const std::time_t now = std::time(nullptr);
  std::tm local{};
  localtime_r(&now, &local);
  char text[64];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S %z", &local);
  return text;
}

}  // namespace

LockHolder LockHolder::this_process(const std::string& command, const std::string& host,
                                    const std::string& run) {
  return {command, host, int64_t(::getpid()), local_time_now(), run};
}

std::string LockHolder::describe() const {
  return "mpiasr " + command + " on host " + host + ", process " + std::to_string(pid) +
         ", started " + started;
}

std::string LockHolder::record() const {
  return "command: " + command + "\nhost: " + host + "\npid: " + std::to_string(pid) +
         "\nstarted: " + started + "\nrun: " + run + "\n";
}

std::optional<LockHolder> LockHolder::parse(const std::string& record) {
  LockHolder holder;
  std::istringstream lines(record);
  for (std::string line; std::getline(lines, line);) {
    const size_t colon = line.find(": ");
    if (colon == std::string::npos) continue;
    const std::string key = line.substr(0, colon), value = line.substr(colon + 2);
    if (key == "command") holder.command = value;
    if (key == "host") holder.host = value;
    if (key == "pid") holder.pid = std::atoll(value.c_str());
    if (key == "started") holder.started = value;
    if (key == "run") holder.run = value;
  }
  if (holder.host.empty() && holder.pid == 0) return std::nullopt;
  return holder;
}

LockFile::LockFile(const std::string& path, const LockHolder& me, ExitCode code)
    : path_(path), code_(code), file_(open_file(path, O_RDWR | O_CREAT, code)) {
  while (::flock(file_.get(), LOCK_EX | LOCK_NB) != 0) {
    if (errno == EINTR) continue;
    if (errno == EWOULDBLOCK) return;  // kInUse
    if (errno == ENOSYS || errno == EOPNOTSUPP || errno == ENOLCK) {
      state_ = State::kNoLocks;
      no_locks_reason_ = file_error_text(errno);
      return;
    }
    fail_file(code, "cannot lock", path, errno);
  }
  state_ = State::kHeld;
  stale_holder_ = holder();
  // The descriptor's offset is still 0: the record is read with pread.
  if (::ftruncate(file_.get(), 0) != 0) fail_file(code, "cannot write", path, errno);
  write_all(file_, me.record(), path, code);
  // Synced, so that a process on another host reads it.
  if (::fsync(file_.get()) != 0) fail_file(code, "cannot write", path, errno);
}

LockFile::~LockFile() {
  if (state_ == State::kHeld && file_.get() >= 0) {
    // An empty record says the lock was released; the close unlocks.
    [[maybe_unused]] const int emptied = ::ftruncate(file_.get(), 0);
  }
}

std::optional<LockHolder> LockFile::holder() const {
  std::string record;
  char buffer[4096];
  for (off_t offset = 0;;) {
    const ssize_t got = ::pread(file_.get(), buffer, sizeof buffer, offset);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) fail_file(code_, "cannot read", path_, errno);
    if (got == 0) break;
    record.append(buffer, size_t(got));
    offset += got;
  }
  return LockHolder::parse(record);
}

}  // namespace mpiasr
