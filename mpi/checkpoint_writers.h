// Checkpoint writers and the resume agreement (DESIGN.md, invariant 6).
//
// fs_mode "shared": one filesystem seen by every node; world rank 0 writes.
// fs_mode "per-node": each node has its own disk; local rank 0 of every node
// writes its own copy. Any other mode is a usage error.
//
// On resume each writer lists the steps it finds intact on its disk and
// agree_resume_step picks the newest step every writer has, so all ranks
// load the same step even if a node crashed before finishing its last write.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "mpi/context.h"

namespace mpiasr::mpi {

bool is_checkpoint_writer(const Context& ctx, const std::string& fs_mode);

// `local_intact_steps`: the intact steps on this rank's disk (any order),
// only read on writer ranks. Returns, on every rank, the newest step intact
// on every writer's disk (shared: rank 0's newest), or nullopt when there is
// none. When a newer step exists on some node but not on all, world rank 0
// writes to stderr, for each node that lacks the newest step, e.g.
//   node 1 (hostB) lacks step 400; resuming from 300
// ("...; starting from scratch" when no step is common).
std::optional<int64_t> agree_resume_step(const Context& ctx, const std::string& fs_mode,
                                         const std::vector<int64_t>& local_intact_steps);

}  // namespace mpiasr::mpi
