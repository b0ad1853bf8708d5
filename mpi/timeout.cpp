#include "mpi/timeout.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>
#include <vector>

#include "mpi/mpi_check.h"

namespace mpiasr::mpi {

namespace {

using Clock = std::chrono::steady_clock;

constexpr int kWhereTag = 1;  // "where are you?", from a rank that timed out
constexpr int kHereTag = 2;   // the answer: a Position

// Where a rank is: the step and the collective it waits in.
struct Position {
  int64_t step = 0;
  char op[56] = {};
};

Position position(int64_t step, const char* op) {
  Position p;
  p.step = step;
  std::snprintf(p.op, sizeof p.op, "%s", op);
  return p;
}

// The collective this process finished last; every rank entered it.
Position last_finished = position(0, "start-up");

}  // namespace

// Best effort, for a message: MPI errors are ignored.
void answer_where(const Context& ctx, const char* op_name) {
  for (;;) {
    int pending = 0;
    MPI_Status status;
    if (MPI_Iprobe(MPI_ANY_SOURCE, kWhereTag, ctx.status_comm(), &pending, &status) !=
            MPI_SUCCESS ||
        !pending) {
      return;
    }
    Position asker, here = position(ctx.step(), op_name);
    MPI_Recv(&asker, sizeof asker, MPI_BYTE, status.MPI_SOURCE, kWhereTag, ctx.status_comm(),
             MPI_STATUS_IGNORE);
    MPI_Send(&here, sizeof here, MPI_BYTE, status.MPI_SOURCE, kHereTag, ctx.status_comm());
  }
}

void poll_or_abort(const Context& ctx, const std::function<bool()>& poll, const char* op_name) {
  const auto start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(ctx.timeout_s());
  const auto spin_until = start + std::chrono::seconds(1);
  while (!poll()) {
    const auto now = Clock::now();
    if (now > deadline) abort_on_timeout(ctx, op_name);
    if (now < spin_until) {
      std::this_thread::yield();
    } else {
      answer_where(ctx, op_name);
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
  }
  last_finished = position(ctx.step(), op_name);
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

std::string ranks_not_arrived(const Context& ctx, const char* op_name) {
  const int size = ctx.world_size(), me = ctx.world_rank();
  const double patience = std::clamp(ctx.timeout_s() / 10, 2.0, 10.0);
  // Static: the questions and answers of ranks that never reply stay posted
  // after this returns (the job is aborted next), so their buffers must live on.
  static Position mine;
  static std::vector<Position> answers;
  static std::vector<MPI_Request> asked, answered;
  mine = position(ctx.step(), op_name);
  answers.assign(size_t(size), Position{});
  asked.assign(size_t(size), MPI_REQUEST_NULL);
  answered.assign(size_t(size), MPI_REQUEST_NULL);
  for (int rank = 0; rank < size; ++rank) {
    if (rank == me) continue;
    MPI_Irecv(&answers[size_t(rank)], sizeof(Position), MPI_BYTE, rank, kHereTag, ctx.status_comm(),
              &answered[size_t(rank)]);
    MPI_Isend(&mine, sizeof mine, MPI_BYTE, rank, kWhereTag, ctx.status_comm(),
              &asked[size_t(rank)]);
  }
  std::vector<int> heard(size_t(size), 0);
  heard[size_t(me)] = 1;
  const auto deadline = Clock::now() + std::chrono::duration<double>(patience);
  while (std::count(heard.begin(), heard.end(), 1) < size && Clock::now() < deadline) {
    answer_where(ctx, op_name);  // the others may be asking too
    for (int rank = 0; rank < size; ++rank) {
      if (!heard[size_t(rank)]) {
        MPI_Test(&answered[size_t(rank)], &heard[size_t(rank)], MPI_STATUS_IGNORE);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  std::ostringstream missing;
  for (int rank = 0; rank < size; ++rank) {
    const Position& other = answers[size_t(rank)];
    if (rank == me || (heard[size_t(rank)] && other.step == mine.step &&
                       std::strncmp(other.op, mine.op, sizeof mine.op) == 0)) {
      continue;
    }
    if (missing.tellp() > 0) missing << "; ";
    missing << "waiting for " << ctx.rank_name(rank) << ": ";
    if (heard[size_t(rank)]) {
      missing << "in '" << std::string(other.op, strnlen(other.op, sizeof other.op)) << "' at step "
              << other.step;
    } else {
      missing << "no answer within " << patience
              << " s (stopped, or busy outside any collective since '" << last_finished.op
              << "' at step " << last_finished.step << ")";
    }
  }
  return missing.str();
}

void abort_on_timeout(const Context& ctx, const char* op_name) {
  const std::string missing = ctx.world_size() > 1 ? ranks_not_arrived(ctx, op_name) : "";
  std::ostringstream message;
  message << "rank " << ctx.world_rank() << ": step " << ctx.step() << ": " << op_name
          << " did not finish within " << ctx.timeout_s() << " s";
  if (!missing.empty()) message << "; " << missing;
  message << "\n";
  std::fputs(message.str().c_str(), stderr);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, int(ExitCode::kDistributed));
  std::_Exit(int(ExitCode::kDistributed));  // MPI_Abort does not return; in case it does
}

}  // namespace mpiasr::mpi
