// Context: who this process is in the job, learned from MPI only (never from
// launcher environment variables), so it is the same under mpirun,
// srun --mpi=pmix and a plain single-process start.
//
//   world    MPI_COMM_WORLD (a duplicate owned here): world rank / size
//   node     MPI_Comm_split_type(world, MPI_COMM_TYPE_SHARED), ordered by
//            world rank: local rank / size; local rank 0 is the node leader
//   leaders  the node leaders, ordered by world rank (MPI_COMM_NULL on the
//            other ranks); a leader's rank in it is its node's index, which
//            the leader broadcasts over its node communicator
//
// It also holds every rank's hostname (MPI_Get_processor_name) and node
// index, for messages that name a rank or a node, the current training step
// and the timeout that every collective in mpi/ applies (see timeout.h).
// The communicators are owned (RAII) and use MPI_ERRORS_RETURN.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <string>
#include <vector>

#include "mpi/communicator.h"
#include "mpi/runtime.h"

namespace mpiasr::mpi {

class Context {
 public:
  // Builds the communicators of MPI_COMM_WORLD; collective over the world.
  static Context world();

  Context(Context&&) noexcept = default;
  Context& operator=(Context&&) noexcept = default;

  int world_rank() const { return world_rank_; }
  int world_size() const { return world_size_; }
  int local_rank() const { return local_rank_; }
  int local_size() const { return local_size_; }
  int node_index() const { return node_index_; }
  int num_nodes() const { return num_nodes_; }
  const std::string& hostname() const { return rank_hostnames_[size_t(world_rank_)]; }
  MPI_Comm world_comm() const { return world_.get(); }
  MPI_Comm node_comm() const { return node_.get(); }
  MPI_Comm leaders_comm() const { return leaders_.get(); }
  // A duplicate of the world for the questions and answers of a rank that
  // timed out (timeout.h), so they never match the program's own messages.
  MPI_Comm status_comm() const { return status_.get(); }
  bool is_main() const { return world_rank_ == 0; }
  bool is_node_leader() const { return local_rank_ == 0; }

  // Threads for this rank's compute: each CPU this process may run on
  // (sched_getaffinity) counts 1 / (number of ranks of the node that may run
  // on it), summed and rounded down, at least 1. Unbound ranks on a C-core
  // node get C / local_size; ranks bound to disjoint cores get their cores.
  int default_threads() const { return default_threads_; }
  // The CPUs this process may run on (sched_getaffinity).
  int usable_cores() const { return usable_cores_; }
  // Threads for this rank's compute from an option's value: 0 gives
  // default_threads(); 1..usable_cores() is taken as it is; anything else
  // (negative, more threads than cores: OpenMP then crashes or eats the
  // memory) throws Error(kUsage) naming `option` and the cores.
  int compute_threads(int requested, const std::string& option) const;

  // Every rank's hostname and node index, and names for messages:
  // "rank 3 (nodeB)", "node 1 (nodeB)".
  const std::string& hostname_of(int rank) const { return rank_hostnames_.at(size_t(rank)); }
  int node_of(int rank) const { return rank_nodes_.at(size_t(rank)); }
  std::string rank_name(int rank) const;
  std::string node_name(int node) const;

  // The step that timeout messages name (0 until set).
  void set_step(int64_t step) { step_ = step; }
  int64_t step() const { return step_; }
  // Seconds a collective may take before the job is aborted (default 600).
  double timeout_s() const { return timeout_s_; }
  void set_timeout(double seconds);

  // "rank 1/4 (nodeA): local rank 1/2 on node 0/2, 1 threads".
  std::string describe() const;

 private:
  Context() = default;

  Communicator world_;
  Communicator node_;
  Communicator leaders_;
  Communicator status_;
  int world_rank_ = 0;
  int world_size_ = 1;
  int local_rank_ = 0;
  int local_size_ = 1;
  int node_index_ = 0;
  int num_nodes_ = 1;
  int default_threads_ = 1;
  int usable_cores_ = 1;
  std::vector<std::string> rank_hostnames_;
  std::vector<int> rank_nodes_;
  int64_t step_ = 0;
  double timeout_s_ = 600.0;
};

}  // namespace mpiasr::mpi
