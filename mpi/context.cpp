#include "mpi/context.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <sstream>
#include <thread>

#include "mpi/mpi_check.h"

namespace mpiasr::mpi {

namespace {

// The CPUs this process may run on.
cpu_set_t usable_cpus() {
  cpu_set_t mine;
  CPU_ZERO(&mine);
  if (sched_getaffinity(0, sizeof(mine), &mine) != 0) {
    const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
    for (int cpu = 0; cpu < std::min(cores, CPU_SETSIZE); ++cpu) CPU_SET(cpu, &mine);
  }
  return mine;
}

// Sum over this rank's CPUs of 1 / (ranks of the node allowed on that CPU).
int threads_from_affinity(MPI_Comm node_comm, int local_size) {
  cpu_set_t mine = usable_cpus();
  std::vector<cpu_set_t> all(static_cast<size_t>(local_size));
  MPI_CHECK(MPI_Allgather(&mine, sizeof(cpu_set_t), MPI_BYTE, all.data(), sizeof(cpu_set_t),
                          MPI_BYTE, node_comm));
  double share = 0.0;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &mine)) continue;
    int sharing = 0;
    for (const cpu_set_t& other : all) sharing += CPU_ISSET(cpu, &other) ? 1 : 0;
    share += 1.0 / sharing;
  }
  return std::max(1, int(std::floor(share + 1e-9)));
}

}  // namespace

Context Context::world() {
  int initialized = 0;
  MPI_CHECK(MPI_Initialized(&initialized));
  MPIASR_CHECK(initialized, "MPI is not initialized: create an mpi::Runtime first");

  Context ctx;
  ctx.world_ = Communicator::duplicate(MPI_COMM_WORLD);
  ctx.status_ = Communicator::duplicate(MPI_COMM_WORLD);
  ctx.world_rank_ = ctx.world_.rank();
  ctx.world_size_ = ctx.world_.size();

  MPI_Comm node = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split_type(ctx.world_.get(), MPI_COMM_TYPE_SHARED, ctx.world_rank_,
                                MPI_INFO_NULL, &node));
  ctx.node_ = Communicator(node);
  ctx.local_rank_ = ctx.node_.rank();
  ctx.local_size_ = ctx.node_.size();

  MPI_Comm leaders = MPI_COMM_NULL;
  MPI_CHECK(MPI_Comm_split(ctx.world_.get(), ctx.is_node_leader() ? 0 : MPI_UNDEFINED,
                           ctx.world_rank_, &leaders));
  ctx.leaders_ = Communicator(leaders);
  int node_info[2] = {0, 1};
  if (ctx.is_node_leader()) node_info[0] = ctx.leaders_.rank(), node_info[1] = ctx.leaders_.size();
  MPI_CHECK(MPI_Bcast(node_info, 2, MPI_INT, 0, ctx.node_.get()));
  ctx.node_index_ = node_info[0];
  ctx.num_nodes_ = node_info[1];

  char name[MPI_MAX_PROCESSOR_NAME] = {};
  int length = 0;
  MPI_CHECK(MPI_Get_processor_name(name, &length));
  std::vector<char> names(size_t(ctx.world_size_) * MPI_MAX_PROCESSOR_NAME);
  MPI_CHECK(MPI_Allgather(name, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, names.data(),
                          MPI_MAX_PROCESSOR_NAME, MPI_CHAR, ctx.world_.get()));
  for (int rank = 0; rank < ctx.world_size_; ++rank) {
    const char* begin = names.data() + size_t(rank) * MPI_MAX_PROCESSOR_NAME;
    ctx.rank_hostnames_.emplace_back(begin, strnlen(begin, MPI_MAX_PROCESSOR_NAME));
  }
  ctx.rank_nodes_.resize(size_t(ctx.world_size_));
  MPI_CHECK(MPI_Allgather(&ctx.node_index_, 1, MPI_INT, ctx.rank_nodes_.data(), 1, MPI_INT,
                          ctx.world_.get()));

  ctx.default_threads_ = threads_from_affinity(ctx.node_.get(), ctx.local_size_);
  const cpu_set_t cpus = usable_cpus();
  ctx.usable_cores_ = std::max(1, CPU_COUNT(&cpus));
  return ctx;
}

int Context::compute_threads(int requested, const std::string& option) const {
  if (requested == 0) return default_threads_;
  if (requested < 0 || requested > usable_cores_) {
    MPIASR_FAIL(ExitCode::kUsage, option << " = " << requested << ": expected 1 to "
                                         << usable_cores_ << ", the cores this process may use on "
                                         << hostname() << " (or 0: cores / ranks on the node, "
                                         << default_threads_ << " here)");
  }
  return requested;
}

std::string Context::rank_name(int rank) const {
  return "rank " + std::to_string(rank) + " (" + hostname_of(rank) + ")";
}

std::string Context::node_name(int node) const {
  // A node's leader is its lowest world rank.
  for (int rank = 0; rank < world_size_; ++rank) {
    if (rank_nodes_[size_t(rank)] == node) {
      return "node " + std::to_string(node) + " (" + rank_hostnames_[size_t(rank)] + ")";
    }
  }
  MPIASR_FAIL(ExitCode::kFailure, "no node " << node << " among " << num_nodes_ << " nodes");
}

void Context::set_timeout(double seconds) {
  MPIASR_CHECK(seconds > 0 && std::isfinite(seconds),
               "collective timeout must be a positive number of seconds, got " << seconds);
  timeout_s_ = seconds;
}

std::string Context::describe() const {
  std::ostringstream out;
  out << "rank " << world_rank_ << "/" << world_size_ << " (" << hostname() << "): local rank "
      << local_rank_ << "/" << local_size_ << " on node " << node_index_ << "/" << num_nodes_
      << ", " << default_threads_ << " threads";
  return out.str();
}

}  // namespace mpiasr::mpi
