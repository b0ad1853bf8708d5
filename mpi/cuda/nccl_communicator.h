// NCCL bootstrapped over MPI (DESIGN.md, invariant 2).
//
//   device     cuda_device_for_rank: local rank % visible devices, and a clear
//              error when a node runs more ranks than it has devices (two ranks
//              on one GPU would share it silently and NCCL rejects that)
//   unique id  rank 0 of the MPI communicator calls ncclGetUniqueId (no GPU
//              needed) and MPI_Bcast carries the 128 bytes to the others
//   join       every rank calls ncclCommInitRankConfig with its rank in that
//              MPI communicator, non-blocking, and polls for completion with
//              the context's timeout
// The world communicator spans MPI_COMM_WORLD; the node communicator the ranks
// of the node (Context::node_comm()), made the same way.
//
// NcclCommunicator owns the handle (RAII). Every NCCL call on it goes through
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
#include <string>

#include "mpi/context.h"

namespace mpiasr::mpi {

// The device of local rank `local_rank` of `local_size` on a node with
// `device_count` visible devices; `node` names the node in the error.
int cuda_device_for_rank(int local_rank, int local_size, int device_count, const std::string& node);

// Picks this rank's device (cuda_device_for_rank over cudaGetDeviceCount) and
// makes it current. Throws Error naming the rank when there is no device.
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
  std::string name_;
  int rank_ = 0, size_ = 1;
  ncclComm_t comm_ = nullptr;
};

}  // namespace mpiasr::mpi
