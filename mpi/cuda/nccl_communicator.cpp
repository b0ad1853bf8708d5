// NCCL bootstrap over MPI and the communicator's error handling (see
// nccl_communicator.h).
#include "mpi/cuda/nccl_communicator.h"

#include <cuda_runtime.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <thread>
#include <utility>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/cuda_device.h"
#include "mpi/collectives.h"
#include "mpi/cuda/nccl_check.h"
#include "mpi/mpi_check.h"
#include "mpi/timeout.h"

namespace mpiasr::mpi {

namespace {

// Polls `poll` (spinning first, then every 100 us) until it returns true or
// `seconds` pass; returns whether it finished.
bool poll_until(const std::function<bool()>& poll, double seconds) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  constexpr int kSpinPolls = 200;
  for (int polls = 0;; ++polls) {
    if (poll()) return true;
    if (Clock::now() > deadline) return false;
    if (polls < kSpinPolls) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

}  // namespace

int cuda_device_for_rank(int local_rank, int visible_devices, const std::string& rank) {
  MPIASR_CHECK(local_rank >= 0, "local rank " << local_rank);
  if (visible_devices < 1) {
    MPIASR_FAIL(ExitCode::kUsage, rank << " sees no CUDA device");
  }
  return visible_devices == 1 ? 0 : local_rank % visible_devices;
}

std::optional<std::pair<int, int>> first_shared_device(const std::vector<std::string>& bus_ids) {
  for (size_t b = 1; b < bus_ids.size(); ++b) {
    for (size_t a = 0; a < b; ++a) {
      if (bus_ids[a] == bus_ids[b]) return std::make_pair(int(a), int(b));
    }
  }
  return std::nullopt;
}

std::string nccl_version() {
  int version = 0;
  if (ncclGetVersion(&version) != ncclSuccess) return "unknown";
  // Since NCCL 2.9: major * 10000 + minor * 100 + patch.
  return std::to_string(version / 10000) + "." + std::to_string(version / 100 % 100) + "." +
         std::to_string(version % 100);
}

int select_cuda_device(const Context& ctx) {
  const CudaDeviceCount devices = cuda_device_count();
  if (devices.count == 0) {
    MPIASR_FAIL(ExitCode::kUsage, ctx.rank_name(ctx.world_rank())
                                      << ": no CUDA device: " << devices.error);
  }
  const int device =
      cuda_device_for_rank(ctx.local_rank(), devices.count, ctx.rank_name(ctx.world_rank()));
  CUDA_CHECK(cudaSetDevice(device));

  // "0000:3b:00.0": 13 characters with the terminator; the rest stays zero.
  constexpr int kBusIdChars = 32;
  char bus_id[kBusIdChars] = {};
  CUDA_CHECK(cudaDeviceGetPCIBusId(bus_id, kBusIdChars - 1, device));
  std::vector<char> gathered(size_t(ctx.local_size()) * kBusIdChars);
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Iallgather(bus_id, kBusIdChars, MPI_CHAR, gathered.data(), kBusIdChars, MPI_CHAR,
                           ctx.node_comm(), &request));
  wait_or_abort(ctx, request, "GPU bus id exchange");
  std::vector<std::string> bus_ids;
  for (int rank = 0; rank < ctx.local_size(); ++rank) {
    bus_ids.emplace_back(gathered.data() + size_t(rank) * kBusIdChars);
  }
  const std::optional<std::pair<int, int>> shared = first_shared_device(bus_ids);
  const int failing = first_failing_rank(ctx, shared.has_value(), "GPU assignment check");
  if (failing < 0) return device;
  std::ostringstream message;
  message << ctx.node_name(ctx.node_of(failing)) << ": ";
  if (shared) {
    message << "local ranks " << shared->first << " and " << shared->second
            << " would share the GPU at PCI " << bus_ids[size_t(shared->first)] << " (rank "
            << ctx.world_rank() << " sees " << devices.count << " devices)";
  } else {
    message << "two ranks would share a GPU (the ranks of that node name them)";
  }
  message << "; run at most one rank per GPU of a node (e.g. srun --gpus-per-task=1), or train "
             "on the CPU (training.device = cpu)";
  throw CollectiveError(ExitCode::kUsage, message.str());
}

ncclUniqueId broadcast_nccl_unique_id(const Context& ctx, MPI_Comm comm) {
  int rank = 0;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  ncclUniqueId id{};
  if (rank == 0) NCCL_CHECK(ncclGetUniqueId(&id));
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ibcast(&id, int(sizeof id), MPI_BYTE, 0, comm, &request));
  wait_or_abort(ctx, request, "NCCL unique id broadcast");
  return id;
}

NcclCommunicator NcclCommunicator::create(const Context& ctx, MPI_Comm comm,
                                          const std::string& name) {
  int rank = 0, size = 1;
  MPI_CHECK(MPI_Comm_rank(comm, &rank));
  MPI_CHECK(MPI_Comm_size(comm, &size));
  const ncclUniqueId id = broadcast_nccl_unique_id(ctx, comm);
  NcclCommunicator result(ctx, name, rank, size);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  const ncclResult_t status = ncclCommInitRankConfig(&result.comm_, size, id, rank, &config);
  result.complete(status, "ncclCommInitRankConfig");
  return result;
}

NcclCommunicator::NcclCommunicator(NcclCommunicator&& other) noexcept
    : ctx_(other.ctx_),
      unwind_(other.unwind_),
      name_(std::move(other.name_)),
      rank_(other.rank_),
      size_(other.size_),
      comm_(std::exchange(other.comm_, nullptr)) {}

NcclCommunicator& NcclCommunicator::operator=(NcclCommunicator&& other) noexcept {
  std::swap(ctx_, other.ctx_);
  std::swap(unwind_, other.unwind_);
  std::swap(name_, other.name_);
  std::swap(rank_, other.rank_);
  std::swap(size_, other.size_);
  std::swap(comm_, other.comm_);
  return *this;
}

NcclCommunicator::~NcclCommunicator() {
  if (!comm_) return;
  if (unwind_.unwinding()) {
    // This rank is failing: its peers may never join a finalize.
    (void)ncclCommAbort(comm_);
    return;
  }
  // Finalize flushes outstanding work; a communicator that cannot finish it
  // in time (a peer is gone) is aborted instead. Destructors do not throw.
  ncclResult_t state = ncclCommFinalize(comm_);
  const bool finalized = poll_until(
      [&] {
        if (state == ncclInProgress && ncclCommGetAsyncError(comm_, &state) != ncclSuccess) {
          state = ncclInternalError;
        }
        return state != ncclInProgress;
      },
      ctx_->timeout_s());
  if (finalized && state == ncclSuccess) {
    (void)ncclCommDestroy(comm_);
  } else {
    (void)ncclCommAbort(comm_);
  }
}

void NcclCommunicator::complete(ncclResult_t result, const char* op) {
  if (result == ncclSuccess) return;
  if (result != ncclInProgress) abort_job(ncclGetErrorString(result), op);
  wait([] { return true; }, op);
}

void NcclCommunicator::wait(const std::function<bool()>& done, const char* op) {
  ncclResult_t state = ncclSuccess;
  const bool finished = poll_until(
      [&] {
        answer_where(*ctx_, op);
        const ncclResult_t query = ncclCommGetAsyncError(comm_, &state);
        if (query != ncclSuccess) state = query;
        if (state != ncclSuccess && state != ncclInProgress) return true;
        return state == ncclSuccess && done();
      },
      ctx_->timeout_s());
  if (!finished) {
    std::ostringstream reason;
    reason << "did not finish within " << ctx_->timeout_s() << " s";
    if (ctx_->world_size() > 1) {
      const std::string missing = ranks_not_arrived(*ctx_, op);
      if (!missing.empty()) reason << "; " << missing;
    }
    abort_job(reason.str(), op);
  }
  if (state != ncclSuccess) abort_job(ncclGetErrorString(state), op);
}

void NcclCommunicator::abort_job(const std::string& reason, const char* op) {
  std::ostringstream message;
  message << "rank " << ctx_->world_rank() << ": step " << ctx_->step() << ": " << op << " (NCCL, "
          << name_ << " communicator): " << reason << "\n";
  std::fputs(message.str().c_str(), stderr);
  std::fflush(stderr);
  if (comm_) (void)ncclCommAbort(comm_);
  comm_ = nullptr;
  MPI_Abort(MPI_COMM_WORLD, int(ExitCode::kDistributed));
  std::_Exit(int(ExitCode::kDistributed));  // MPI_Abort does not return; in case it does
}

}  // namespace mpiasr::mpi
