// Timeouts for collectives: no silent hangs (DESIGN.md, invariant 8).
//
// Every collective in mpi/ is started non-blocking and completed by polling
// (MPI_Testall, which also progresses MPI) until it finishes or
// ctx.timeout_s() seconds have passed. For the first second the poll loop
// only yields the core between polls, so collectives run at full speed (a
// non-blocking broadcast or reduce of megabytes advances one segment per
// poll: sleeping between polls made a 14 MB hierarchical reduction 10x
// slower). After that it sleeps 50 us between polls, so ranks waiting for a
// slow peer (rank 0 preparing data, say) leave the cores to those working.
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
