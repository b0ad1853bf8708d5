// The lock of output.dir; see output_lock.h.
#include "src/output_lock.h"

#include <unistd.h>

#include <iostream>
#include <sstream>
#include <tuple>
#include <utility>

#include "mpi/broadcast.h"
#include "mpi/checkpoint_writers.h"
#include "mpi/collectives.h"
#include "src/base/error.h"
#include "src/base/file.h"

namespace mpiasr {

namespace {

// Why a writer of `run` could not take the lock another process holds, and
// the exit code: another run's (kOutputInUse), or this run's own (kUsage).
std::pair<std::string, ExitCode> in_use(const Config& config, const LockFile& lock,
                                        const std::string& run) {
  const std::string& dir = config.output.dir;
  // The holder writes its record right after it takes the lock; a run that
  // started at the same moment may look before then, so it waits up to 2 s.
  std::optional<LockHolder> holder = lock.holder();
  for (int wait = 0; !holder && wait < 200; ++wait) {
    ::usleep(10000);
    holder = lock.holder();
  }
  std::ostringstream message;
  ExitCode code = ExitCode::kOutputInUse;
  if (holder && holder->run == run) {
    message << "output.dir '" << dir << "' is one folder that several nodes of this run see (its "
            << "lock file " << lock.path() << " is held by this run's " << holder->describe()
            << "), but checkpoint.fs_mode is per-node, where every node writes its own copy: set "
            << "checkpoint.fs_mode=shared, or point output.dir at a disk of each node's own";
    code = ExitCode::kUsage;
  } else {
    message << "output.dir '" << dir << "' is in use by "
            << (holder ? holder->describe() : "an mpiasr process that has not recorded itself yet")
            << " (its lock file " << lock.path()
            << "): wait for that run to end, or give this one another output.dir";
  }
  message << " (" << __FILE__ << ":" << __LINE__ << ")";
  return {message.str(), code};
}

}  // namespace

std::optional<LockFile> lock_output_dir(const Config& config, const mpi::Context& ctx,
                                        const std::string& command) {
  const std::string& dir = config.output.dir;
  // The run is named after its first process, which every writer records.
  const std::string run =
      mpi::broadcast_bytes(ctx, ctx.hostname() + " " + std::to_string(::getpid()));
  std::optional<LockFile> lock;
  std::string failure;
  ExitCode code = ExitCode::kOk;
  if (mpi::is_checkpoint_writer(ctx, std::string(to_string(config.checkpoint.fs_mode)))) {
    try {
      make_folders(dir, "output.dir", ExitCode::kUsage);
      lock.emplace(dir + "/" + kOutputLockFile,
                   LockHolder::this_process(command, ctx.hostname(), run), ExitCode::kUsage);
    } catch (const Error& e) {
      failure = e.what();
      code = e.code();
    }
  }
  const bool refused = lock && lock->state() == LockFile::State::kInUse;
  const int failed = mpi::first_failing_rank(ctx, refused || !failure.empty(), "output.dir lock");
  if (failed >= 0) {
    // Every writer of this run that took the lock has recorded itself by now.
    if (refused) std::tie(failure, code) = in_use(config, *lock, run);
    const std::string message = mpi::broadcast_bytes(ctx, failure, failed);
    const int64_t failed_code = mpi::allreduce_max(
        ctx, ctx.world_rank() == failed ? int64_t(code) : 0, "output.dir lock code");
    throw mpi::CollectiveError(ExitCode(failed_code), message);
  }
  if (!lock) return lock;
  std::ostringstream note;
  if (lock->stale_holder()) {
    note << ctx.rank_name(ctx.world_rank()) << ": output.dir '" << dir << "': took over the lock "
         << lock->path() << " of " << lock->stale_holder()->describe()
         << ", which ended without releasing it (killed, or its node lost)\n";
  }
  if (lock->state() == LockFile::State::kNoLocks) {
    note << ctx.rank_name(ctx.world_rank()) << ": warning: output.dir '" << dir
         << "': its filesystem has no locks (" << lock->no_locks_reason()
         << "), so a second run on it is not stopped\n";
  }
  std::cerr << note.str() << std::flush;
  return lock;
}

}  // namespace mpiasr
