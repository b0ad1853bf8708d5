// A lock that one process at a time holds: flock(2) on a lock file, which
// also records who holds it. The kernel releases a flock when its process
// ends, however it ends (kill -9 included), so a lock is never held by a
// process that is gone; its record stays, and the next process that takes
// the lock learns from it that the last holder ended without releasing it
// (a stale lock). Releasing empties the record, then unlocks.
//
// The record, a "key: value" line each:
//   command: train
//   host: nodeA
//   pid: 4242
//   started: 2026-12-04 23:44:10 +0100
//   run: nodeA 4240        (the first process of the holder's run, which
//                           the run's other processes name too)
//
// flock reaches other hosts where the filesystem carries locks between them
// (local disks trivially; NFS v4, and v3 with lockd; Lustre mounted with
// -o flock; GPFS). Linux does flock on NFS with POSIX record locks, which a
// process loses when it closes any descriptor of the file, so the holder
// reads and writes the file through its own descriptor only. A filesystem
// whose locks stay on each host (NFS mounted nolock or local_lock, Lustre
// with -o localflock) stops a second process on the same host only; one
// without locks (flock fails with ENOSYS, EOPNOTSUPP or ENOLCK) stops none,
// and the lock says so (State::kNoLocks).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "src/base/error.h"
#include "src/base/file.h"

namespace mpiasr {

struct LockHolder {
  std::string command;  // what the holder runs ("train")
  std::string host;
  int64_t pid = 0;
  std::string started;  // when it took the lock, local time with the UTC offset
  std::string run;      // its run's first process: "host pid"

  // This process, running `command` on `host` in `run`, from now.
  static LockHolder this_process(const std::string& command, const std::string& host,
                                 const std::string& run);
  // "mpiasr train on host nodeA, process 4242, started 2026-12-04 23:44:10 +0100".
  std::string describe() const;
  // The record's lines, and back; parse gives nullopt for a record that
  // names no host and no process (an empty file: the lock was released).
  std::string record() const;
  static std::optional<LockHolder> parse(const std::string& record);
};

class LockFile {
 public:
  enum class State {
    kHeld,     // this process holds it
    kInUse,    // another process holds it
    kNoLocks,  // the filesystem has no locks: nothing is held, nothing stopped
  };

  // Takes the lock file `path` (created when missing) for `me`, unless
  // another process holds it. Throws Error(code) naming the file and the
  // system's reason when it cannot be created, read or written.
  LockFile(const std::string& path, const LockHolder& me, ExitCode code);
  LockFile(LockFile&&) noexcept = default;
  LockFile& operator=(LockFile&&) = delete;
  LockFile(const LockFile&) = delete;
  LockFile& operator=(const LockFile&) = delete;
  // Held: empties the record, then closes the file, which unlocks it.
  ~LockFile();

  State state() const { return state_; }
  const std::string& path() const { return path_; }
  // kHeld: the holder before this one, which ended without releasing the
  // lock (killed, or its node lost); nullopt when the lock was released or new.
  const std::optional<LockHolder>& stale_holder() const { return stale_holder_; }
  // kNoLocks: flock's error, in words.
  const std::string& no_locks_reason() const { return no_locks_reason_; }
  // kInUse: the holder as the file records it now (nullopt until it has
  // written its record).
  std::optional<LockHolder> holder() const;

 private:
  std::string path_;
  ExitCode code_;
  FileDescriptor file_;
  State state_ = State::kInUse;
  std::optional<LockHolder> stale_holder_;
  std::string no_locks_reason_;
};

}  // namespace mpiasr
