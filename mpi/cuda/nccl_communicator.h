// NCCL bootstrapped over MPI (DESIGN.md, invariant 2).
//
//   device     cuda_device_for_rank: the one device a rank sees (Slurm's
//              --gpus-per-task=1 gives each rank its own), else local rank %
//              visible devices; then the ranks of a node compare the PCI bus
//              ids of their devices (all-gathered over the node communicator)
//              and stop with a clear error only when two picked the same GPU
//              (they would share it silently, and NCCL rejects that)
//   unique id  rank 0 of the MPI communicator calls ncclGetUniqueId (no GPU
//              needed) and MPI_Bcast carries the 128 bytes to the others
//   join       every rank calls ncclCommInitRankConfig with its rank in that
//              MPI communicator, non-blocking, and polls for completion with
//              the context's timeout
// The world communicator spans MPI_COMM_WORLD; the node communicator the ranks
// of the node (Context::node_comm()), made the same way.
//
// NcclCommunicator owns the handle (RAII). Its destructor finalizes it (waits
// for the peers, up to the context's timeout) at a normal end of scope, and
// aborts it at once while an exception unwinds the stack (UnwindDetector):
// a rank that throws must not wait for peers that will never join.
// Every NCCL call on it goes through
// complete(), which waits out ncclInProgress (non-blocking communicators may
// return it from any call). On an NCCL error, or when a wait passes the
// context's timeout, the communicator is aborted (ncclCommAbort, so no kernel
// is left waiting on a peer) and the job is ended with a message naming the
// rank, the step and the operation, exit code 5 (kDistributed), like the MPI
// collectives (mpi/timeout.h).
#pragma once

#include <mpi.h>
#include <nccl.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "mpi/context.h"
#include "src/base/error.h"

namespace mpiasr::mpi {

// The NCCL library loaded, e.g. "2.21.5", for `mpiasr --version`.
std::string nccl_version();

// The device of a rank that sees `visible_devices` devices: the only one when
// it sees exactly one, otherwise local_rank % visible_devices. Throws
// Error(kUsage) naming `rank` when it sees none.
int cuda_device_for_rank(int local_rank, int visible_devices, const std::string& rank);

// The first pair of local ranks (a < b) whose devices have the same PCI bus
// id (bus_ids[local rank]), or nullopt when every rank has its own device.
std::optional<std::pair<int, int>> first_shared_device(const std::vector<std::string>& bus_ids);

// Picks this rank's device (cuda_device_for_rank over cudaGetDeviceCount),
// makes it current and checks that no two ranks of a node picked the same GPU
// (collective over the world: every rank throws CollectiveError(kUsage)
// naming the node, the local ranks and the bus id when any node has such a
// pair). Throws Error naming the rank when it sees no device.
int select_cuda_device(const Context& ctx);

// Rank 0 of `comm` makes the id, every rank of `comm` returns it (collective).
ncclUniqueId broadcast_nccl_unique_id(const Context& ctx, MPI_Comm comm);

class NcclCommunicator {
 public:
  // Collective over `comm`, on the current device; `name` ("world", "node")
  // appears in messages.
  static NcclCommunicator create(const Context& ctx, MPI_Comm comm, const std::string& name);

  NcclCommunicator(NcclCommunicator&& other) noexcept;
  NcclCommunicator& operator=(NcclCommunicator&& other) noexcept;
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;
  ~NcclCommunicator();

  ncclComm_t get() const { return comm_; }
  int rank() const { return rank_; }
  int size() const { return size_; }
  const std::string& name() const { return name_; }

  // Checks the result of an NCCL call on this communicator (`op` names it):
  // waits while it is in progress, and on an error aborts (see above).
  void complete(ncclResult_t result, const char* op);
  // Polls done() until it returns true, checking for NCCL errors between
  // polls; on an error or the context's timeout, aborts (see above).
  void wait(const std::function<bool()>& done, const char* op);

 private:
  NcclCommunicator(const Context& ctx, std::string name, int rank, int size)
      : ctx_(&ctx), name_(std::move(name)), rank_(rank), size_(size) {}
  [[noreturn]] void abort_job(const std::string& reason, const char* op);

  const Context* ctx_ = nullptr;
  UnwindDetector unwind_;
  std::string name_;
  int rank_ = 0, size_ = 1;
  ncclComm_t comm_ = nullptr;
};

}  // namespace mpiasr::mpi
