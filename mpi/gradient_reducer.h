// GradientReducer: sums fp32 gradients over all ranks while backward runs
// (CPU backend; DESIGN.md "How data flows in one training step").
//
// Buckets and the step protocol are the BucketPlan's (mpi/bucket_plan.h):
// begin_step(); on_grads_ready(offset, n) for each range that backward has
// made final; finish(). A bucket's reduction starts once the plan hands it
// out (complete, in index order). MPI progresses in-flight buckets whenever
// on_grads_ready is called (MPI_Testsome; no extra thread, no core taken from
// compute). finish() starts the buckets not started yet, waits for all with
// the context's timeout, and leaves the SUM over ranks in grads. Averaging is
// the caller's business (the loss divisor).
//
// Reduction of one bucket, in place on its own duplicated communicators:
//   flat          MPI_Iallreduce(SUM) over the world
//   hierarchical  MPI_Ireduce(SUM) to local rank 0 on the node, then
//                 MPI_Iallreduce(SUM) among node leaders, then MPI_Ibcast from
//                 local rank 0 on the node (a second node communicator, so
//                 reduces and broadcasts keep one order per communicator)
//   sharded       (ZeRO-1) MPI_Ireduce_scatter_block(SUM) over the world:
//                 only this rank's piece of the bucket (the plan's shards,
//                 one per world rank) holds the sum afterwards; the other
//                 pieces hold partial sums nobody reads. The in-place result
//                 lands at the bucket's start and is moved to the piece.
// gather_parameters(params) then all-gathers a buffer laid out like the
// gradients (the masters after the sharded optimizer step), each rank
// contributing its pieces: MPI_Iallgather in place, bucket by bucket.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <vector>

#include "mpi/bucket_plan.h"
#include "mpi/communicator.h"
#include "mpi/context.h"

namespace mpiasr::mpi {

struct ReducerOptions {
  size_t bucket_bytes = 25 << 20;
  size_t first_bucket_bytes = 1 << 20;
  // Reduce within each node, all-reduce among node leaders, broadcast within
  // each node: less traffic between nodes. On a single node it moves the
  // data twice and is slower than flat (see mpi/bench/allreduce_bench.cpp).
  bool hierarchical = false;
  // The end of every marked range is rounded up to a multiple of this many
  // elements (clamped to count). Set it to kParameterAlignment when grads is
  // a ParameterStore buffer, whose tensors are padded to that alignment, so
  // the padding after a layer counts as ready with the layer.
  size_t range_alignment = 1;
  // Reduce-scatter instead of all-reduce, for the sharded optimizer (ZeRO-1);
  // the buffer must be whole pieces (see BucketPlan). Not with hierarchical.
  bool shard = false;
};

class GradientReducer {
 public:
  // Collective over the world (duplicates communicators). `ctx` and `grads`
  // must outlive the reducer.
  GradientReducer(const Context& ctx, float* grads, size_t count, ReducerOptions options = {});
  GradientReducer(const GradientReducer&) = delete;
  GradientReducer& operator=(const GradientReducer&) = delete;

  void begin_step();
  void on_grads_ready(size_t offset, size_t count);
  void finish();
  // Sharded only: *value (host) becomes its sum over the ranks.
  void sum_over_ranks(double* value);
  // Sharded only: every rank's pieces of `params` [count] to every rank.
  void gather_parameters(float* params);

  const BucketPlan& plan() const { return plan_; }
  // Seconds the last finish() blocked: the communication backward did not hide.
  double last_wait_seconds() const { return last_wait_seconds_; }
  // Buckets whose reduction started before the last finish() was called.
  size_t last_buckets_started_early() const { return last_started_early_; }
  size_t num_buckets() const { return plan_.num_buckets(); }
  // Bucket i as [offset, offset + count) of grads.
  std::pair<size_t, size_t> bucket_range(size_t i) const { return plan_.bucket_range(i); }

 private:
  struct Bucket {
    int stages_done = 0;     // stages completed this step
    bool in_flight = false;  // a stage is posted and not yet complete
  };
  enum class Stage {
    kWorldAllreduce,
    kWorldReduceScatter,
    kNodeReduce,
    kLeadersAllreduce,
    kNodeBroadcast
  };

  void post(size_t bucket, size_t stage);
  // After bucket b's stage: moves a reduce-scatter's result to this rank's piece.
  void complete(size_t bucket, size_t stage);
  // Tests in-flight buckets and posts every stage that can start; returns
  // true when all buckets have completed every stage.
  bool progress();

  const Context& ctx_;
  float* grads_;
  BucketPlan plan_;
  std::vector<Stage> stages_;  // this rank's stages, in order
  std::vector<Communicator> stage_comms_;
  std::vector<Bucket> buckets_;
  std::vector<MPI_Request> requests_;  // one per bucket
  std::vector<int> completed_;         // MPI_Testsome's output
  std::vector<size_t> posted_;         // per stage: buckets posted so far (in order)
  double last_wait_seconds_ = 0.0;
  size_t last_started_early_ = 0;
};

}  // namespace mpiasr::mpi
