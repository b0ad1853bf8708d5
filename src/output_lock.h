// The lock of output.dir (docs/training.md, "One run per output folder"):
// held, for the whole of `mpiasr train` or `prepare`, by the ranks that
// write the folder, world rank 0 with checkpoint.fs_mode = shared, local
// rank 0 of every node with per-node (mpi/checkpoint_writers.h), as the lock
// file output.dir/mpiasr.lock (src/base/lock_file.h). A second run on a
// folder a run holds stops at start, before it writes anything: every one
// of its ranks exits with kOutputInUse and a message naming the folder and
// the holder (host, process id, start time), e.g.
//   output.dir 'exp/tiny' is in use by mpiasr train on host nodeA, process
//   4242, started 2026-12-04 23:44:10 +0100 (its lock file exp/tiny/mpiasr.lock):
//   wait for that run to end, or give this one another output.dir
// A lock its holder left behind (killed, its node lost) is taken over, and
// the writer that takes it says whose it was on stderr. eval and transcribe
// take no lock: they read a folder being trained.
//
// A writer refused by a writer of its own run means a per-node run whose
// output.dir is one folder that several nodes see: exit kUsage, saying so.
#pragma once

#include <optional>
#include <string>

#include "mpi/context.h"
#include "src/base/lock_file.h"
#include "src/config.h"

namespace mpiasr {

inline constexpr const char* kOutputLockFile = "mpiasr.lock";

// Makes output.dir and takes its lock for `command` ("train", "prepare") on
// the writer ranks; collective. Returns the lock there (nullopt on the other
// ranks), released when it goes. When a writer cannot take it, every rank
// throws mpi::CollectiveError with that writer's message and code (the
// lowest such rank's).
std::optional<LockFile> lock_output_dir(const Config& config, const mpi::Context& ctx,
                                        const std::string& command);

}  // namespace mpiasr
