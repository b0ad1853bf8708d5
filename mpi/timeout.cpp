#include "mpi/timeout.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>

#include "mpi/mpi_check.h"

namespace mpiasr::mpi {

void poll_or_abort(const Context& ctx, const std::function<bool()>& poll, const char* op_name) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(ctx.timeout_s());
  const auto spin_until = start + std::chrono::seconds(1);
  while (!poll()) {
    const auto now = Clock::now();
    if (now > deadline) abort_on_timeout(ctx, op_name);
    if (now < spin_until) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
}

void wait_or_abort(const Context& ctx, std::span<MPI_Request> requests, const char* op_name) {
  poll_or_abort(
      ctx,
      [&] {
        int done = 0;
        MPI_CHECK(MPI_Testall(int(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE));
        return done != 0;
      },
      op_name);
}

void abort_on_timeout(const Context& ctx, const char* op_name) {
  std::ostringstream message;
  message << "rank " << ctx.world_rank() << ": step " << ctx.step() << ": " << op_name
          << " did not finish within " << ctx.timeout_s() << " s\n";
  std::fputs(message.str().c_str(), stderr);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, int(ExitCode::kDistributed));
  std::_Exit(int(ExitCode::kDistributed));  // MPI_Abort does not return; in case it does
}

}  // namespace mpiasr::mpi
