// NCCL on the CPU, for the emulation build (MPIASR_CUDA_EMU;
// kernels/cuda_emu/include/nccl.h includes this): the subset of NCCL 2.28's
// API the project calls, with NCCL's names, types, codes and error strings,
// between emulated devices of MPI processes (one rank per process). Every
// process of a communicator must be a rank of the same MPI job
// (MPI_COMM_WORLD), with MPI initialized (MPI_THREAD_MULTIPLE if several
// threads call NCCL).
//
//   unique id   ncclGetUniqueId writes a magic, the caller's world rank (the
//               "root" that the others join) and a serial number of that
//               process. The process that made the id must be a rank of
//               the communicator (the project's
//               bootstrap makes it on rank 0 and broadcasts it over MPI).
//   join        every other rank sends (rank, nranks) to the root over
//               MPI_COMM_WORLD; when all have, the root sends every rank the
//               world rank of each communicator rank. Non-blocking
//               (config->blocking = 0): the init returns ncclInProgress and
//               ncclCommGetAsyncError answers it until the peers have joined;
//               blocking: the init returns when they have. Messages of one
//               communicator carry its own tags, so communicators with
//               common ranks do not mix.
//   operations  all-reduce, reduce-scatter, all-gather and broadcast of
//               float, double, half and bfloat16 (ncclSum only), each one a
//               host function on the stream (cudaLaunchHostFunc), so it runs
//               in order with the kernels there: every rank sends what the
//               others need over MPI and reduces what it receives in NCCL's
//               ring order (nccl.cpp, ring_sum). Calls between
//               ncclGroupStart and ncclGroupEnd are issued at the outermost
//               ncclGroupEnd, in call order. A stream being captured is
//               refused (ncclInvalidUsage).
//   waiting     a join or an operation whose peers have not all answered
//               within MPIASR_EMU_NCCL_TIMEOUT_S seconds (default 300)
//               fails the communicator with ncclRemoteError, reported by
//               ncclCommGetAsyncError, and names the missing ranks on
//               stderr: the host thread runs the operation, so it stands in
//               for a GPU kernel that would wait until the communicator is
//               aborted.
//   end         ncclCommFinalize runs the work queued on every stream (the
//               operations still queued among it), and so does
//               ncclCommDestroy before it frees the communicator;
//               ncclCommAbort fails the communicator first, so its queued
//               operations move nothing and wait for no peer.
//   faults      MPIASR_EMU_NCCL_FAULT, a comma-separated list of
//               CALL:N:KIND[@RANK]: the N-th call (from 1) of CALL (init,
//               allreduce, reducescatter, allgather, broadcast) in this
//               process, on world rank RANK only if given, returns
//               ncclSystemError without doing anything (KIND error), or does
//               its work and returns ncclInProgress, after which the
//               communicator answers ncclInProgress to 3 polls
//               (inprogress), or kills the process with SIGKILL before its
//               work (kill). A malformed list makes every call return
//               ncclInvalidArgument, with the entry named on stderr.
#pragma once

#include <cstddef>

#include "kernels/cuda_emu/runtime.h"

#define NCCL_MAJOR 2
#define NCCL_MINOR 28
#define NCCL_PATCH 9
#define NCCL_VERSION(X, Y, Z) \
  (((X) <= 2 && (Y) <= 8) ? (X)*1000 + (Y)*100 + (Z) : (X)*10000 + (Y)*100 + (Z))
#define NCCL_VERSION_CODE NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct {
  char internal[NCCL_UNIQUE_ID_BYTES];
} ncclUniqueId;

struct ncclComm;
typedef struct ncclComm* ncclComm_t;

typedef enum {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7,
} ncclResult_t;

typedef enum {
  ncclInt8 = 0,
  ncclChar = 0,
  ncclUint8 = 1,
  ncclInt32 = 2,
  ncclInt = 2,
  ncclUint32 = 3,
  ncclInt64 = 4,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclHalf = 6,
  ncclFloat32 = 7,
  ncclFloat = 7,
  ncclFloat64 = 8,
  ncclDouble = 8,
  ncclBfloat16 = 9,
} ncclDataType_t;

typedef enum {
  ncclSum = 0,
  ncclProd = 1,
  ncclMax = 2,
  ncclMin = 3,
  ncclAvg = 4,
} ncclRedOp_t;

#define NCCL_CONFIG_UNDEF_INT (-2147483648)
// The fields up to netName; the emulation reads `blocking` only.
typedef struct ncclConfig_v21700 {
  size_t size;
  unsigned int magic;
  unsigned int version;
  int blocking;
  int cgaClusterSize;
  int minCTAs;
  int maxCTAs;
  const char* netName;
} ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER                                                         \
  {                                                                                     \
    sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), \
        NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT,            \
        NCCL_CONFIG_UNDEF_INT, nullptr                                                  \
  }

ncclResult_t ncclGetVersion(int* version);
ncclResult_t ncclGetUniqueId(ncclUniqueId* unique_id);
const char* ncclGetErrorString(ncclResult_t result);

ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId comm_id, int rank,
                                    ncclConfig_t* config);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error);
ncclResult_t ncclCommFinalize(ncclComm_t comm);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclCommAbort(ncclComm_t comm);

ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream);
ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount,
                               ncclDataType_t datatype, ncclRedOp_t op, ncclComm_t comm,
                               cudaStream_t stream);
ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount,
                           ncclDataType_t datatype, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count,
                           ncclDataType_t datatype, int root, ncclComm_t comm, cudaStream_t stream);
ncclResult_t ncclGroupStart();
ncclResult_t ncclGroupEnd();
