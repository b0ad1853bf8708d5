// NcclGradientReducer: sums the fp32 gradients on the GPU over all ranks with
// NCCL while backward runs (the CUDA counterpart of mpi/gradient_reducer.h,
// with the same buckets and step protocol).
//
// Buckets and the step protocol are the BucketPlan's (mpi/bucket_plan.h):
// begin_step(); on_grads_ready(offset, n) for each range backward has made
// final; finish(). When the plan hands out a bucket (complete, in index
// order), an event is recorded on the compute stream (after the kernels that
// wrote those gradients), the communication stream waits on it, and
// ncclAllReduce(SUM, in place) is queued there. finish() starts what is left,
// makes the compute stream wait for the last all-reduce (so the optimizer sees
// the sums) and blocks the host until it is done, with the context's timeout;
// an NCCL error or a timeout aborts the communicator and the job, naming rank,
// step and operation (nccl_communicator.h). Averaging is the caller's business
// (the loss divisor), as on the CPU.
//
// With a 16-bit wire (NcclReducerOptions::wire ncclBfloat16 or ncclFloat16) each bucket is
// cast to it on the communication stream into wire_buffer, all-reduced
// there (NCCL sums in that type) and cast back into the fp32 gradients: half
// the bytes on the links, at the wire type's rounding of every partial sum.
// fp16's range is 65504: an overflow gives inf, which the fp16 loss scaler
// treats as any non-finite gradient (the step is skipped, the scale halved).
//
// Sharded (ZeRO-1, NcclReducerOptions::shard; DESIGN.md "Sharded optimizer
// state"): each bucket is reduce-scattered in place (ncclReduceScatter), so
// rank r holds the sum of its shard piece (the plan's) and partial sums
// elsewhere; sum_over_ranks all-reduces the gradient norm's sum of squares
// and gather_parameters all-gathers every bucket of the updated fp32 masters
// in place, both queued on the compute stream, where the optimizer runs.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_resources.h"
#include "mpi/bucket_plan.h"
#include "mpi/cuda/nccl_communicator.h"

namespace mpiasr::mpi {

struct NcclReducerOptions {
  size_t bucket_bytes = 25 << 20;
  size_t first_bucket_bytes = 1 << 20;
  // The end of every marked range is rounded up to a multiple of this many
  // elements (clamped to count): kParameterAlignment for a ParameterStore's
  // gradients, so a layer's padding counts as ready with the layer.
  size_t range_alignment = 1;
  // The type moved and summed: ncclFloat32, ncclBfloat16 or ncclFloat16;
  // for the 16-bit two, wire_buffer is device memory for 2 bytes per
  // gradient (the reducer does not own it).
  ncclDataType_t wire = ncclFloat32;
  void* wire_buffer = nullptr;
  // Reduce-scatter instead of all-reduce, for the sharded optimizer (ZeRO-1);
  // count must then be a multiple of size x range_alignment.
  bool shard = false;
  // Record each bucket's times every step (last_timeline); off: no clock is
  // read and no event recorded beyond the step's own.
  bool record_timeline = false;
};

class NcclGradientReducer {
 public:
  // `comm` and `grads` (device, on the current device) must outlive the
  // reducer; `compute_stream` is the stream backward runs on.
  NcclGradientReducer(NcclCommunicator& comm, cudaStream_t compute_stream, float* grads,
                      size_t count, NcclReducerOptions options = {});
  NcclGradientReducer(const NcclGradientReducer&) = delete;
  NcclGradientReducer& operator=(const NcclGradientReducer&) = delete;

  void begin_step();
  void on_grads_ready(size_t offset, size_t count);
  void finish();

  // Seconds the last finish() blocked: the communication backward did not hide.
  double last_wait_seconds() const { return last_wait_seconds_; }
  // No host thread of its own: NCCL progresses on the GPU and in its proxy thread.
  double last_comm_cpu_seconds() const { return 0.0; }
  // Buckets whose all-reduce was queued before the last finish() was called.
  size_t last_buckets_started_early() const { return last_started_early_; }
  size_t num_buckets() const { return plan_.num_buckets(); }
  // Bucket i as [offset, offset + count) of grads.
  std::pair<size_t, size_t> bucket_range(size_t i) const { return plan_.bucket_range(i); }
  const BucketPlan& plan() const { return plan_; }
  // With record_timeline, the last step's buckets, host times all: ready when
  // the plan handed the bucket out (backward's kernels queued, not run),
  // start once its all-reduce was queued on the communication stream, end
  // when the host first saw it done (an event after it, queried as finish()
  // waits; a bucket done before finish() is seen when finish() begins);
  // empty without.
  const std::vector<BucketTimes>& last_timeline() const { return timeline_; }

  // Sharded only: *value (a double in device memory) summed over the ranks.
  void sum_over_ranks(double* value);
  // Sharded only: every rank's pieces of params [count] (device) to every rank.
  void gather_parameters(float* params);

 private:
  // Queues the all-reduce of every bucket the plan hands out.
  void start_ready_buckets();
  // With record_timeline: stamps the end of the buckets whose done event is
  // complete; returns whether all are.
  bool stamp_done_buckets();
  // Bucket [begin, begin + count) summed over the ranks: all of it, or
  // (sharded) this rank's piece.
  void reduce_bucket(size_t begin, size_t count);
  // The same through the 16-bit copy wire [count] of the bucket.
  template <typename Wire>
  void reduce_on_wire(Wire* wire, float* data, size_t count);

  NcclCommunicator& comm_;
  cudaStream_t compute_stream_;
  float* grads_;
  ncclDataType_t wire_;
  void* wire_buffer_;
  bool shard_;
  bool record_timeline_;
  BucketPlan plan_;
  CudaStream comm_stream_;
  std::vector<CudaEvent> ready_events_;  // one per bucket
  CudaEvent done_event_;
  std::vector<BucketTimes> timeline_;
  std::vector<CudaEvent> bucket_done_events_;  // with record_timeline: one per bucket
  size_t stamped_ = 0;                         // buckets whose end is stamped this step
  double last_wait_seconds_ = 0.0;
  size_t last_started_early_ = 0;
};

}  // namespace mpiasr::mpi
