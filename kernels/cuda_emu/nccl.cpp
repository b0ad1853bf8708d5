// NCCL on the CPU (see nccl.h): communicators joined over MPI_COMM_WORLD, and
// collectives run as host functions on their stream, each moving its data in
// point-to-point MPI messages and reducing what it received in NCCL's ring
// order.
//
// The ring order (NCCL's runRing of all_reduce.h and reduce_scatter.h, and
// FuncSum of reduce_kernel.h): with the ranks in ring order 0, 1, ..., n - 1,
// chunk c starts at rank c + 1, which sends its own values on; every next
// rank adds its own to what it received, in the wire type (FuncSum is __hadd
// for half and bfloat16: the sum correctly rounded at every hop; a float or
// double add otherwise), and rank c adds the last term (indices mod n):
//   sum of chunk c = (((x[c+1] + x[c+2]) + x[c+3]) + ...) + x[c]
// The reduce-scatter's piece of rank r is chunk r. The all-reduce's chunks
// are the n equal contiguous parts of the buffer (the last one shorter), as
// NCCL cuts a buffer that fits one loop of one channel; NCCL cuts larger
// buffers into loops and channels of its own chunk size, which changes the
// rank an element's sum starts at, not the order along the ring.
#include "kernels/cuda_emu/nccl.h"

#include "kernels/cuda_emu/memory_check.h"

#include <mpi.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

// Prints the failed MPI call with its file and line; returns whether `code` is MPI_SUCCESS.
bool mpi_ok(int code, const char* call, const char* file, int line) {
  if (code == MPI_SUCCESS) return true;
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) text[0] = '\0';
  std::fprintf(stderr, "%s:%d: %s failed: %s (MPI error %d)\n", file, line, call, text, code);
  return false;
}
#define EMU_MPI_OK(call) mpi_ok((call), #call, __FILE__, __LINE__)

int world_rank() {
  int rank = 0;
  if (!EMU_MPI_OK(MPI_Comm_rank(MPI_COMM_WORLD, &rank))) return -1;
  return rank;
}

// MPIASR_EMU_NCCL_TIMEOUT_S, else 300: how long a join or an operation waits for its peers.
double wait_seconds() {
  static const double seconds = [] {
    const char* value = std::getenv("MPIASR_EMU_NCCL_TIMEOUT_S");
    const double parsed = value && *value ? std::atof(value) : 300.0;
    if (parsed <= 0) {
      std::fprintf(stderr, "%s:%d: MPIASR_EMU_NCCL_TIMEOUT_S=\"%s\" is not a positive number\n",
                   __FILE__, __LINE__, value);
      std::exit(2);
    }
    return parsed;
  }();
  return seconds;
}

// Now plus wait_seconds().
Clock::time_point wait_deadline() {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(wait_seconds()));
}

// Waits until `done` returns true, yielding between polls for the first
// 20 ms (a peer that answers at once is usually a few polls away: the
// exchange's messages need both sides to poll) and sleeping 100 us between
// them after that; returns false when `deadline` passes first.
bool poll_until(const std::function<bool()>& done, Clock::time_point deadline) {
  const auto spin_until = Clock::now() + std::chrono::milliseconds(20);
  for (;;) {
    if (done()) return true;
    const auto now = Clock::now();
    if (now > deadline) return false;
    if (now < spin_until) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }
}

// ---- injected faults (MPIASR_EMU_NCCL_FAULT) -----------------------------------

enum class Call { kInit, kAllReduce, kReduceScatter, kAllGather, kBroadcast };
constexpr const char* kCallNames[] = {"init", "allreduce", "reducescatter", "allgather",
                                      "broadcast"};
constexpr int kCalls = 5;

enum class Fault { kNone, kError, kInProgress, kKill, kMalformedList };
constexpr const char* kFaultNames[] = {"", "error", "inprogress", "kill"};

struct PlannedFault {
  Call call;
  long nth;
  Fault fault;
  int rank;  // -1: every rank
};

// The entries of MPIASR_EMU_NCCL_FAULT; `malformed` when one is not CALL:N:KIND[@RANK].
struct FaultPlan {
  std::vector<PlannedFault> faults;
  bool malformed = false;
};

bool parse_fault(const std::string& entry, PlannedFault& out) {
  std::string spec = entry;
  out.rank = -1;
  if (const size_t at = spec.find('@'); at != std::string::npos) {
    char* end = nullptr;
    out.rank = int(std::strtol(spec.c_str() + at + 1, &end, 10));
    if (at + 1 == spec.size() || *end != '\0' || out.rank < 0) return false;
    spec.resize(at);
  }
  const size_t first = spec.find(':'), second = spec.find(':', first + 1);
  if (first == std::string::npos || second == std::string::npos) return false;
  const std::string call = spec.substr(0, first), kind = spec.substr(second + 1);
  char* end = nullptr;
  out.nth = std::strtol(spec.c_str() + first + 1, &end, 10);
  if (end != spec.c_str() + second || out.nth < 1) return false;
  int c = 0;
  while (c < kCalls && call != kCallNames[c]) ++c;
  int f = 1;
  while (f <= 3 && kind != kFaultNames[f]) ++f;
  if (c == kCalls || f > 3) return false;
  out.call = Call(c);
  out.fault = Fault(f);
  return true;
}

const FaultPlan& fault_plan() {
  static const FaultPlan plan = [] {
    FaultPlan parsed;
    const char* value = std::getenv("MPIASR_EMU_NCCL_FAULT");
    std::string list = value ? value : "";
    size_t begin = 0;
    while (begin < list.size()) {
      size_t end = list.find(',', begin);
      if (end == std::string::npos) end = list.size();
      const std::string entry = list.substr(begin, end - begin);
      PlannedFault fault{};
      if (!parse_fault(entry, fault)) {
        std::fprintf(stderr,
                     "%s:%d: MPIASR_EMU_NCCL_FAULT entry \"%s\" is not CALL:N:KIND[@RANK] (CALL "
                     "init, allreduce, reducescatter, allgather or broadcast; N from 1; KIND "
                     "error, inprogress or kill)\n",
                     __FILE__, __LINE__, entry.c_str());
        parsed.malformed = true;
      }
      parsed.faults.push_back(fault);
      begin = end + 1;
    }
    return parsed;
  }();
  return plan;
}

std::atomic<long> call_counts[kCalls];

// Counts this call of `call` and returns the fault planned for it.
Fault next_fault(Call call) {
  const FaultPlan& plan = fault_plan();
  if (plan.malformed) return Fault::kMalformedList;
  const long nth = ++call_counts[int(call)];
  for (const PlannedFault& planned : plan.faults) {
    if (planned.call != call || planned.nth != nth) continue;
    if (planned.rank >= 0 && planned.rank != world_rank()) continue;
    std::fprintf(stderr, "emulated NCCL: world rank %d: %s call %ld: injected fault '%s'\n",
                 world_rank(), kCallNames[int(call)], nth, kFaultNames[int(planned.fault)]);
    std::fflush(stderr);
    if (planned.fault == Fault::kKill) std::raise(SIGKILL);
    return planned.fault;
  }
  return Fault::kNone;
}

// ---- unique ids and tags ---------------------------------------------------------

constexpr char kMagic[16] = "mpiasr-emu-nccl";
// Tags from kTagBase: two per communicator (joining, data), kSerials per root process.
constexpr int kTagBase = 1 << 20;
constexpr int kSerials = 256;

struct IdContents {
  char magic[sizeof kMagic];
  int root;    // world rank of the process that made the id
  int serial;  // ids that process made before this one
};
static_assert(sizeof(IdContents) <= NCCL_UNIQUE_ID_BYTES);

int join_tag(const IdContents& id) {
  return kTagBase + 2 * (id.root * kSerials + id.serial % kSerials);
}

size_t type_bytes(ncclDataType_t type) {
  switch (type) {
    case ncclFloat16:
    case ncclBfloat16:
      return 2;
    case ncclFloat32:
      return 4;
    case ncclFloat64:
      return 8;
    default:
      return 0;  // not emulated
  }
}

}  // namespace

struct ncclComm {
  int rank = 0, nranks = 1;
  int root = 0;                  // world rank of the process that made the id
  bool is_root = false;          // this process made the id
  int join_tag = 0;              // data messages: join_tag + 1
  std::vector<int> world_ranks;  // of every rank: known to all once joined
  // Joining: the root receives (rank, nranks) from every other rank into
  // `hello`, then sends `world_ranks` to each; another rank sends `hello` and
  // receives `world_ranks`.
  int hello[2] = {0, 0};
  int joined = 1;
  std::vector<MPI_Request> requests;
  Clock::time_point join_deadline;
  std::atomic<int> state{ncclInProgress};  // ncclResult_t: the asynchronous error
  std::atomic<int> in_progress_polls{0};   // injected: polls still answered ncclInProgress
};

namespace {

void fail(ncclComm* comm, ncclResult_t error) {
  int expected = comm->state.load();
  while (expected == ncclSuccess || expected == ncclInProgress) {
    if (comm->state.compare_exchange_weak(expected, error)) return;
  }
}

// Cancels what is outstanding (an aborted join or operation) and forgets it.
void drop_requests(std::vector<MPI_Request>& requests) {
  for (MPI_Request& request : requests) {
    if (request == MPI_REQUEST_NULL) continue;
    (void)(EMU_MPI_OK(MPI_Cancel(&request)) && EMU_MPI_OK(MPI_Request_free(&request)));
  }
  requests.clear();
}

bool all_done(std::vector<MPI_Request>& requests) {
  int done = 0;
  if (!EMU_MPI_OK(MPI_Testall(int(requests.size()), requests.data(), &done, MPI_STATUSES_IGNORE))) {
    return true;  // nothing will finish; the caller fails the communicator
  }
  return done != 0;
}

// The root's side of a join: takes the hellos that have come, then sends the table.
void progress_root_join(ncclComm* comm) {
  while (comm->joined < comm->nranks) {
    int arrived = 0;
    MPI_Status status;
    if (!EMU_MPI_OK(MPI_Test(&comm->requests[0], &arrived, &status))) {
      return fail(comm, ncclSystemError);
    }
    if (!arrived) return;
    const int rank = comm->hello[0];
    if (comm->hello[1] != comm->nranks || rank < 0 || rank >= comm->nranks ||
        comm->world_ranks[size_t(rank)] >= 0) {
      std::fprintf(stderr,
                   "emulated NCCL: world rank %d joins as rank %d of %d the communicator of %d "
                   "ranks made by world rank %d (a rank out of range, or one already there)\n",
                   status.MPI_SOURCE, rank, comm->hello[1], comm->nranks, comm->root);
      return fail(comm, ncclInvalidUsage);
    }
    comm->world_ranks[size_t(rank)] = status.MPI_SOURCE;
    if (++comm->joined < comm->nranks &&
        !EMU_MPI_OK(MPI_Irecv(comm->hello, 2, MPI_INT, MPI_ANY_SOURCE, comm->join_tag,
                              MPI_COMM_WORLD, &comm->requests[0]))) {
      return fail(comm, ncclSystemError);
    }
    if (comm->joined == comm->nranks) {
      comm->requests.clear();
      for (int r = 0; r < comm->nranks; ++r) {
        if (r == comm->rank) continue;
        comm->requests.push_back(MPI_REQUEST_NULL);
        if (!EMU_MPI_OK(MPI_Isend(comm->world_ranks.data(), comm->nranks, MPI_INT,
                                  comm->world_ranks[size_t(r)], comm->join_tag, MPI_COMM_WORLD,
                                  &comm->requests.back()))) {
          return fail(comm, ncclSystemError);
        }
      }
    }
  }
  if (all_done(comm->requests)) comm->state = ncclSuccess;
}

// Moves a join on; past the deadline the communicator fails with ncclRemoteError.
void progress_join(ncclComm* comm) {
  if (comm->state != ncclInProgress) return;
  if (comm->is_root) {
    progress_root_join(comm);
  } else if (all_done(comm->requests)) {
    comm->state = ncclSuccess;
  }
  if (comm->state == ncclInProgress && Clock::now() > comm->join_deadline) {
    if (comm->is_root) {
      std::fprintf(stderr, "emulated NCCL: rank %d of %d: %d of %d ranks joined within %g s\n",
                   comm->rank, comm->nranks, comm->joined, comm->nranks, wait_seconds());
    } else {
      std::fprintf(stderr,
                   "emulated NCCL: rank %d of %d: no answer from the root (world rank %d) "
                   "within %g s\n",
                   comm->rank, comm->nranks, comm->root, wait_seconds());
    }
    drop_requests(comm->requests);
    fail(comm, ncclRemoteError);
  }
}

// ---- operations --------------------------------------------------------------

struct Bytes {
  const void* data = nullptr;
  size_t size = 0;
};

// Sends sends[r] to every rank r and receives from every rank r into
// receives[r] (size 0: nothing), then waits for all of it; a rank that has
// not sent within the timeout fails the communicator with ncclRemoteError,
// naming it. Returns whether everything arrived.
bool exchange(ncclComm* comm, const char* what, const std::vector<Bytes>& sends,
              const std::vector<Bytes>& receives) {
  const int tag = comm->join_tag + 1;
  std::vector<MPI_Request> receiving(size_t(comm->nranks), MPI_REQUEST_NULL);
  std::vector<MPI_Request> sending(size_t(comm->nranks), MPI_REQUEST_NULL);
  bool posted = true;
  for (int r = 0; r < comm->nranks && posted; ++r) {
    const int peer = comm->world_ranks[size_t(r)];
    const Bytes& in = receives[size_t(r)];
    const Bytes& out = sends[size_t(r)];
    posted =
        (in.size == 0 || EMU_MPI_OK(MPI_Irecv(const_cast<void*>(in.data), int(in.size), MPI_BYTE,
                                              peer, tag, MPI_COMM_WORLD, &receiving[size_t(r)]))) &&
        (out.size == 0 || EMU_MPI_OK(MPI_Isend(out.data, int(out.size), MPI_BYTE, peer, tag,
                                               MPI_COMM_WORLD, &sending[size_t(r)])));
  }
  if (!posted) {
    drop_requests(receiving);
    drop_requests(sending);
    fail(comm, ncclSystemError);
    return false;
  }
  const bool arrived =
      poll_until([&] { return all_done(receiving) && all_done(sending); }, wait_deadline());
  if (arrived) return true;
  std::string missing;
  for (int r = 0; r < comm->nranks; ++r) {
    int done = 1;
    if (receiving[size_t(r)] != MPI_REQUEST_NULL) {
      (void)EMU_MPI_OK(MPI_Test(&receiving[size_t(r)], &done, MPI_STATUS_IGNORE));
    }
    if (!done) {
      missing += " " + std::to_string(r) + " (world rank " +
                 std::to_string(comm->world_ranks[size_t(r)]) + ")";
    }
  }
  std::fprintf(stderr, "emulated NCCL: rank %d of %d: %s: nothing from rank%s within %g s\n",
               comm->rank, comm->nranks, what, missing.c_str(), wait_seconds());
  drop_requests(receiving);
  drop_requests(sending);
  fail(comm, ncclRemoteError);
  return false;
}

template <typename T>
T add(T a, T b) {
  if constexpr (sizeof(T) == 2) {
    return __hadd(a, b);  // NCCL's FuncSum for half and bfloat16
  } else {
    return a + b;
  }
}

// out[i] = the ring sum of terms[r][i] over the ranks r (see the top of the
// file), element i being in chunk first_chunk + i / chunk_elements. An
// element of out may be the same element of terms[r].
template <typename T>
void ring_sum(const std::vector<const void*>& terms, size_t count, size_t chunk_elements,
              size_t first_chunk, void* out) {
  const size_t n = terms.size();
  for (size_t i = 0; i < count; ++i) {
    const size_t chunk = first_chunk + i / chunk_elements;
    T sum = static_cast<const T*>(terms[(chunk + 1) % n])[i];
    for (size_t hop = 2; hop <= n; ++hop) {
      sum = add(sum, static_cast<const T*>(terms[(chunk + hop) % n])[i]);
    }
    static_cast<T*>(out)[i] = sum;
  }
}

void ring_sum(ncclDataType_t type, const std::vector<const void*>& terms, size_t count,
              size_t chunk_elements, size_t first_chunk, void* out) {
  switch (type) {
    case ncclFloat16:
      return ring_sum<__half>(terms, count, chunk_elements, first_chunk, out);
    case ncclBfloat16:
      return ring_sum<__nv_bfloat16>(terms, count, chunk_elements, first_chunk, out);
    case ncclFloat32:
      return ring_sum<float>(terms, count, chunk_elements, first_chunk, out);
    default:
      return ring_sum<double>(terms, count, chunk_elements, first_chunk, out);
  }
}

// One queued collective: `count` is the all-reduce's and broadcast's count,
// the reduce-scatter's receive count and the all-gather's send count.
struct Operation {
  Call call;
  const void* send;
  void* recv;
  size_t count;
  ncclDataType_t type;
  int root;
  ncclComm* comm;
};

void all_reduce(const Operation& op) {
  ncclComm* comm = op.comm;
  const size_t n = size_t(comm->nranks), bytes = op.count * type_bytes(op.type);
  std::vector<char> received(n * bytes);
  std::vector<Bytes> sends(n, Bytes{op.send, bytes}), receives(n);
  std::vector<const void*> terms(n, op.send);
  for (size_t r = 0; r < n; ++r) {
    if (int(r) == comm->rank) continue;
    receives[r] = Bytes{received.data() + r * bytes, bytes};
    terms[r] = received.data() + r * bytes;
  }
  sends[size_t(comm->rank)] = Bytes{};
  if (!exchange(comm, "all-reduce", sends, receives)) return;
  ring_sum(op.type, terms, op.count, std::max<size_t>(1, (op.count + n - 1) / n), 0, op.recv);
  mpiasr::emu::detail::mark_written(op.recv, bytes);
}

void reduce_scatter(const Operation& op) {
  ncclComm* comm = op.comm;
  const size_t n = size_t(comm->nranks), bytes = op.count * type_bytes(op.type);
  const char* send = static_cast<const char*>(op.send);
  std::vector<char> received(n * bytes);
  std::vector<Bytes> sends(n), receives(n);
  std::vector<const void*> terms(n, send + size_t(comm->rank) * bytes);
  for (size_t r = 0; r < n; ++r) {
    if (int(r) == comm->rank) continue;
    sends[r] = Bytes{send + r * bytes, bytes};
    receives[r] = Bytes{received.data() + r * bytes, bytes};
    terms[r] = received.data() + r * bytes;
  }
  if (!exchange(comm, "reduce-scatter", sends, receives)) return;
  ring_sum(op.type, terms, op.count, std::max<size_t>(1, op.count), size_t(comm->rank), op.recv);
  mpiasr::emu::detail::mark_written(op.recv, bytes);
}

void all_gather(const Operation& op) {
  ncclComm* comm = op.comm;
  const size_t n = size_t(comm->nranks), bytes = op.count * type_bytes(op.type);
  char* recv = static_cast<char*>(op.recv);
  std::vector<Bytes> sends(n, Bytes{op.send, bytes}), receives(n);
  for (size_t r = 0; r < n; ++r) receives[r] = Bytes{recv + r * bytes, bytes};
  sends[size_t(comm->rank)] = receives[size_t(comm->rank)] = Bytes{};
  if (!exchange(comm, "all-gather", sends, receives)) return;
  std::memmove(recv + size_t(comm->rank) * bytes, op.send, bytes);
  mpiasr::emu::detail::mark_written(recv, n * bytes);
}

void broadcast(const Operation& op) {
  ncclComm* comm = op.comm;
  const size_t n = size_t(comm->nranks), bytes = op.count * type_bytes(op.type);
  std::vector<Bytes> sends(n), receives(n);
  if (comm->rank == op.root) {
    sends.assign(n, Bytes{op.send, bytes});
    sends[size_t(op.root)] = Bytes{};
  } else {
    receives[size_t(op.root)] = Bytes{op.recv, bytes};
  }
  if (!exchange(comm, "broadcast", sends, receives)) return;
  if (comm->rank == op.root) std::memmove(op.recv, op.send, bytes);
  mpiasr::emu::detail::mark_written(op.recv, bytes);
}

// The host function of an operation on its stream; it owns `data`. What an
// operation writes into its receive buffer counts as written for initcheck
// (memory_check.h), as a copy's bytes do; a failed one writes nothing.
void run_operation(void* data) {
  const std::unique_ptr<Operation> op(static_cast<Operation*>(data));
  if (op->comm->state != ncclSuccess) return;  // a failed communicator moves nothing
  switch (op->call) {
    case Call::kAllReduce:
      return all_reduce(*op);
    case Call::kReduceScatter:
      return reduce_scatter(*op);
    case Call::kAllGather:
      return all_gather(*op);
    case Call::kBroadcast:
      return broadcast(*op);
    case Call::kInit:
      return;
  }
}

thread_local int group_depth = 0;
thread_local std::vector<std::unique_ptr<Operation>> grouped;
thread_local std::vector<cudaStream_t> grouped_streams;

ncclResult_t launch(std::unique_ptr<Operation> op, cudaStream_t stream) {
  if (cudaLaunchHostFunc(stream, run_operation, op.get()) != cudaSuccess) {
    return ncclUnhandledCudaError;
  }
  (void)op.release();  // run_operation owns it now
  return ncclSuccess;
}

// Checks an operation and queues it on `stream` (or in the open group).
ncclResult_t enqueue(Operation op, ncclRedOp_t reduction, cudaStream_t stream) {
  ncclComm* comm = op.comm;
  if (!comm) return ncclInvalidArgument;
  if (comm->state != ncclSuccess) {
    return comm->state == ncclInProgress ? ncclInvalidUsage : ncclResult_t(comm->state.load());
  }
  const size_t element = type_bytes(op.type);
  if (element == 0 || reduction != ncclSum || op.root < 0 || op.root >= comm->nranks ||
      (op.count > 0 && (!op.recv || !op.send)) ||
      op.count * element > size_t(INT_MAX) / size_t(comm->nranks)) {
    return ncclInvalidArgument;
  }
  cudaStreamCaptureStatus capturing = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capturing) != cudaSuccess) return ncclInvalidArgument;
  if (capturing != cudaStreamCaptureStatusNone) {
    std::fprintf(stderr, "emulated NCCL: %s on a capturing stream is not emulated\n",
                 kCallNames[int(op.call)]);
    return ncclInvalidUsage;
  }
  const Fault fault = next_fault(op.call);
  if (fault == Fault::kMalformedList) return ncclInvalidArgument;
  if (fault == Fault::kError) return ncclSystemError;
  if (group_depth > 0) {
    grouped.push_back(std::make_unique<Operation>(op));
    grouped_streams.push_back(stream);
    return ncclSuccess;
  }
  if (const ncclResult_t queued = launch(std::make_unique<Operation>(op), stream);
      queued != ncclSuccess) {
    return queued;
  }
  if (fault != Fault::kInProgress) return ncclSuccess;
  comm->in_progress_polls = 3;
  return ncclInProgress;
}

}  // namespace

// ---- the API -----------------------------------------------------------------

ncclResult_t ncclGetVersion(int* version) {
  if (!version) return ncclInvalidArgument;
  *version = NCCL_VERSION_CODE;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id) {
  if (!unique_id) return ncclInvalidArgument;
  int initialized = 0;
  if (!EMU_MPI_OK(MPI_Initialized(&initialized))) return ncclSystemError;
  if (!initialized) {
    std::fprintf(stderr, "emulated NCCL: ncclGetUniqueId needs MPI initialized\n");
    return ncclInvalidUsage;
  }
  static std::atomic<int> serials{0};
  IdContents id{};
  std::memcpy(id.magic, kMagic, sizeof kMagic);
  id.root = world_rank();
  id.serial = serials++;
  int* tag_ub = nullptr;
  int found = 0;
  if (!EMU_MPI_OK(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found))) {
    return ncclSystemError;
  }
  if (found && join_tag(id) + 1 > *tag_ub) {
    std::fprintf(stderr, "emulated NCCL: world rank %d needs tag %d, above MPI_TAG_UB %d\n",
                 id.root, join_tag(id) + 1, *tag_ub);
    return ncclInternalError;
  }
  *unique_id = ncclUniqueId{};
  std::memcpy(unique_id->internal, &id, sizeof id);
  return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank,
                                    ncclConfig_t* config) {
  if (!comm) return ncclInvalidArgument;
  *comm = nullptr;
  IdContents id;
  std::memcpy(&id, comm_id.internal, sizeof id);
  if (std::memcmp(id.magic, kMagic, sizeof kMagic) != 0 || nranks < 1 || rank < 0 ||
      rank >= nranks) {
    return ncclInvalidArgument;
  }
  const Fault fault = next_fault(Call::kInit);
  if (fault == Fault::kMalformedList) return ncclInvalidArgument;
  if (fault == Fault::kError) return ncclSystemError;
  auto made = std::make_unique<ncclComm>();
  made->rank = rank;
  made->nranks = nranks;
  made->root = id.root;
  made->join_tag = join_tag(id);
  made->world_ranks.assign(size_t(nranks), -1);
  made->join_deadline = wait_deadline();
  made->is_root = world_rank() == id.root;
  made->world_ranks[size_t(rank)] = world_rank();
  made->requests.assign(made->is_root ? 1 : 2, MPI_REQUEST_NULL);
  bool posted = true;
  if (nranks == 1) {
    made->requests.clear();
  } else if (made->is_root) {
    posted = EMU_MPI_OK(MPI_Irecv(made->hello, 2, MPI_INT, MPI_ANY_SOURCE, made->join_tag,
                                  MPI_COMM_WORLD, &made->requests[0]));
  } else {
    made->hello[0] = rank;
    made->hello[1] = nranks;
    posted = EMU_MPI_OK(MPI_Isend(made->hello, 2, MPI_INT, id.root, made->join_tag, MPI_COMM_WORLD,
                                  &made->requests[0])) &&
             EMU_MPI_OK(MPI_Irecv(made->world_ranks.data(), nranks, MPI_INT, id.root,
                                  made->join_tag, MPI_COMM_WORLD, &made->requests[1]));
  }
  if (!posted) {
    drop_requests(made->requests);
    return ncclSystemError;
  }
  *comm = made.release();
  const bool blocking = !config || config->blocking != 0;
  progress_join(*comm);
  while (blocking && (*comm)->state == ncclInProgress) {
    std::this_thread::sleep_for(std::chrono::microseconds(100));
    progress_join(*comm);
  }
  if (fault == Fault::kInProgress) (*comm)->in_progress_polls = 3;
  const ncclResult_t state = ncclResult_t((*comm)->state.load());
  return fault == Fault::kInProgress && state == ncclSuccess ? ncclInProgress : state;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (!comm || !async_error) return ncclInvalidArgument;
  progress_join(comm);
  *async_error = ncclResult_t(comm->state.load());
  if (*async_error == ncclSuccess && comm->in_progress_polls > 0) {
    --comm->in_progress_polls;
    *async_error = ncclInProgress;
  }
  return ncclSuccess;
}

// The operations still queued on streams run (all queued work does).
ncclResult_t ncclCommFinalize(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  mpiasr::emu::detail::run_queued_work();
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (const ncclResult_t finalized = ncclCommFinalize(comm); finalized != ncclSuccess) {
    return finalized;
  }
  drop_requests(comm->requests);
  delete comm;
  return ncclSuccess;
}

// Its queued operations are dropped: they run on a failed communicator, which moves nothing.
ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  fail(comm, ncclRemoteError);
  return ncclCommDestroy(comm);
}

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  return enqueue({Call::kAllReduce, sendbuff, recvbuff, count, datatype, 0, comm}, op, stream);
}

ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream) {
  return enqueue({Call::kReduceScatter, sendbuff, recvbuff, recvcount, datatype, 0, comm}, op,
                 stream);
}

ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream) {
  return enqueue({Call::kAllGather, sendbuff, recvbuff, sendcount, datatype, 0, comm}, ncclSum,
                 stream);
}

ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  return enqueue({Call::kBroadcast, sendbuff, recvbuff, count, datatype, root, comm}, ncclSum,
                 stream);
}

ncclResult_t ncclGroupStart() {
  ++group_depth;
  return ncclSuccess;
}

ncclResult_t ncclGroupEnd() {
  if (group_depth == 0) return ncclInvalidUsage;
  if (--group_depth > 0) return ncclSuccess;
  ncclResult_t result = ncclSuccess;
  for (size_t i = 0; i < grouped.size(); ++i) {
    const ncclResult_t queued = launch(std::move(grouped[i]), grouped_streams[i]);
    if (result == ncclSuccess) result = queued;
  }
  grouped.clear();
  grouped_streams.clear();
  return result;
}

// NCCL's own wording.
const char* ncclGetErrorString(ncclResult_t result) {
  switch (result) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case ncclSystemError:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case ncclInternalError:
      return "internal error - please report this issue to the NCCL developers";
    case ncclInvalidArgument:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case ncclInvalidUsage:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
    case ncclRemoteError:
      return "remote process exited or there was a network error";
    case ncclInProgress:
      return "NCCL operation in progress";
  }
  return "unknown result code";
}
