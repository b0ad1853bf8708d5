// Broadcasts over MPI, for what other nodes need and must not assume to find
// on a shared disk (tokenizer models, CMVN statistics, prepared lists).
// Both apply the context's timeout (timeout.h).
#pragma once

#include <string>

#include "mpi/context.h"

namespace mpiasr::mpi {

// Returns root's `bytes` on every rank (the argument is ignored elsewhere).
// Sent as a 64-bit length, then chunks of at most 1 GiB.
std::string broadcast_bytes(const Context& ctx, const std::string& bytes, int root = 0);

// Makes `path` on every node hold the file `root` has at `path`: root reads
// it and broadcasts it; every node leader whose copy is missing or different
// writes it (parent folders created; temporary file, fsync, rename), others
// leave it alone; then all ranks synchronize. Throws Error on every rank
// when root cannot read the file (kBadInput) or a leader cannot write it
// (kDistributed), naming the path and the rank.
void broadcast_file(const Context& ctx, const std::string& path, int root = 0);

}  // namespace mpiasr::mpi
