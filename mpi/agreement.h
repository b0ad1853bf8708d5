// Start-up agreement (DESIGN.md, invariant 5): before training, every rank
// compares a hash of what must be identical everywhere (the resolved config,
// the manifest). All hashes are gathered on every rank; if any differs from
// rank 0's, every rank throws CollectiveError(kDistributed) (collectives.h)
// with the same message, naming `what` and the ranks whose hash differs from
// rank 0's, e.g.
//   config differs between ranks: rank 2 (nodeB) has hash 00000000deadbeef,
//   rank 0 (nodeA) has 0000000012345678 (ranks that differ from rank 0: 2)
#pragma once

#include <cstdint>
#include <string>

#include "mpi/context.h"

namespace mpiasr::mpi {

void check_agreement(const Context& ctx, const std::string& what, uint64_t hash);

}  // namespace mpiasr::mpi
