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
// On timeout it first finds out which ranks did not arrive: it asks every
// other rank where it is (a message on ctx.status_comm()) and waits a short
// while of its own (a tenth of the timeout, 2 to 10 s) for the answers. A rank
// waiting in a collective answers from its poll loop, with its step and the
// collective's name; a rank that is stopped, or busy outside any collective,
// does not. It then prints one line to stderr naming every rank that is not
// in this collective, with its host, step and operation:
//   rank 0: step 812: gradient all-reduce did not finish within 300 s;
//   waiting for rank 2 (nodeC): no answer within 10 s (stopped, or busy
//   outside any collective since 'step token count' at step 812)
//   [or: rank 2 (nodeC): in 'checkpoint write' at step 812]
// and calls MPI_Abort(MPI_COMM_WORLD, 5), which ends every rank of the job
// (mpirun and srun both propagate the abort), exit code 5 = kDistributed.
#pragma once

#include <mpi.h>

#include <functional>
#include <span>
#include <string>

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

// Answers the questions of ranks that timed out: this rank is in `op_name` at
// ctx.step(). poll_or_abort does it while it waits; waits that do not go
// through it (NCCL's) call it while they poll.
void answer_where(const Context& ctx, const char* op_name);

// Asks every other rank where it is and returns, for the timeout message,
// "waiting for rank R (host): ..." for each rank not in `op_name` at this
// step, joined by "; " ("" when every rank is in it). Takes up to
// clamp(timeout_s / 10, 2, 10) seconds. Used before aborting on a timeout
// (here and for NCCL's).
std::string ranks_not_arrived(const Context& ctx, const char* op_name);

}  // namespace mpiasr::mpi
