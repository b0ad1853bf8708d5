// run_on_main / run_once_per_node (DESIGN.md, invariant 7): run a function on
// one rank of the job or one rank per node, then synchronize all ranks.
// Used for data preparation, tokenizer training, CMVN statistics; whatever
// other nodes need afterwards is sent with broadcast_file / broadcast_bytes,
// never assumed to be on a shared disk.
//
// The closing synchronization is an all-reduce of "did f fail here?" with
// the context's timeout (so f must finish within ctx.timeout_s()). If f
// throws on its rank, that rank rethrows f's exception and every other rank
// throws Error(kDistributed) naming the rank where f failed; nobody hangs.
#pragma once

#include <functional>

#include "mpi/context.h"

namespace mpiasr::mpi {

// f on world rank 0, then every rank waits for it.
void run_on_main(const Context& ctx, const std::function<void()>& f);
// f on local rank 0 of every node, then every rank waits for all of them.
void run_once_per_node(const Context& ctx, const std::function<void()>& f);

}  // namespace mpiasr::mpi
