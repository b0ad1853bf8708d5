// Timeouts for collectives: no silent hangs (DESIGN.md, invariant 8).
//
// Every collective in mpi/ is started non-blocking and completed by
// wait_or_abort, which polls MPI_Testall (progressing MPI) until the requests
// finish or ctx.timeout_s() seconds have passed. The first polls spin; after
// that it sleeps 100 us between polls, so a rank waiting for a slow peer
// (rank 0 preparing data, say) leaves the cores to the ranks that work.
// On timeout it prints to stderr
//   rank R: step S: <op> did not finish within T s
// and calls MPI_Abort(MPI_COMM_WORLD, 5), which ends every rank of the job
// (mpirun and srun both propagate the abort), exit code 5 = kDistributed.
#pragma once

#include <mpi.h>

#include <functional>
#include <span>

#include "mpi/context.h"

namespace mpiasr::mpi {

// Calls poll() (which should test requests and may start new ones) until it
// returns true; aborts the job when that takes longer than ctx.timeout_s().
void poll_or_abort(const Context& ctx, const std::function<bool()>& poll, const char* op_name);

// Waits for all `requests` (MPI_REQUEST_NULL entries are done already).
void wait_or_abort(const Context& ctx, std::span<MPI_Request> requests, const char* op_name);
inline void wait_or_abort(const Context& ctx, MPI_Request& request, const char* op_name) {
  wait_or_abort(ctx, std::span<MPI_Request>(&request, 1), op_name);
}

// Prints the timeout message for `op_name` and aborts the job.
[[noreturn]] void abort_on_timeout(const Context& ctx, const char* op_name);

}  // namespace mpiasr::mpi
