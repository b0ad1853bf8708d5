// GradientReducer: sums fp32 gradients over all ranks while backward runs
// (CPU backend; DESIGN.md "How data flows in one training step").
//
// Buckets and the step protocol are the BucketPlan's (mpi/bucket_plan.h):
// begin_step(); on_grads_ready(offset, n) for each range that backward has
// made final; finish(). A bucket's reduction starts once the plan hands it
// out (complete, in index order). finish() hands out the rest and waits until
// grads holds the SUM over ranks. Averaging is the caller's business (the
// loss divisor).
//
// Progress: a communication thread of the reducer makes every MPI call of
// the reduction, so buckets keep moving while the calling thread computes
// backward (MPI only advances inside MPI calls; OpenMPI has no progress
// thread of its own). It sleeps on a condition variable while no bucket is in
// flight and, while some are, polls them (MPI_Testsome) with sleeps between
// polls that grow from 20 us to 500 us while nothing completes and drop back
// when something does: no busy spin that takes a core from compute. Until
// finish() the thread runs under SCHED_BATCH (src/base/thread_policy.h): on
// a core busy with compute its wakes wait for the scheduler's tick instead
// of preempting the compute thread; on an idle core they run at once. Once
// finish() waits, its core is idle and the last rounds are exposed time, so
// the thread is back to SCHED_OTHER and the sleeps grow to 50 us only. The
// calling thread never calls MPI between begin_step() and the end of
// finish(), so MPI_THREAD_SERIALIZED is enough. The thread's CPU time per
// step is measured (last_comm_cpu_seconds). The collective timeout runs from
// finish(): when the step is not done within ctx.timeout_s() the
// communication thread aborts the job naming rank, step and
// "gradient all-reduce" (mpi/timeout.h, exit code 5); while finish() waits,
// it answers the "where are you" of ranks that timed out elsewhere.
//
// Reduction of one bucket, on point-to-point messages (tag = bucket index)
// over the reducer's own duplicated communicators, as a fixed sequence of
// rounds per rank, each round a set of non-blocking sends and at most one
// receive, the next round posted when the last one is complete:
//   flat          ring all-reduce over the world of W ranks: the bucket is
//                 cut into W parts; W - 1 reduce-scatter rounds (send part
//                 r - k - 1 to rank r + 1, receive part r - k - 2 from rank
//                 r - 1 and add it to this rank's copy), after which rank r
//                 holds the sum of part r, then W - 1 all-gather rounds (send
//                 the summed part r - k, receive part r - k - 1 in place).
//                 Each rank sends and receives 2 (W - 1) / W of the bucket,
//                 the least any all-reduce moves, and every link of the ring
//                 is busy in both directions at once.
//   hierarchical  within each node the other ranks send the bucket to local
//                 rank 0, which adds them in local-rank order; the node
//                 leaders run the ring above among themselves; local rank 0
//                 sends the sum back to the node's other ranks. Only the
//                 leaders' ring crosses the network.
//   sharded       (ZeRO-1) the flat ring's reduce-scatter rounds only: part r
//                 of each bucket is the plan's shard piece of rank r, and
//                 holds the sum on rank r afterwards; the other parts hold
//                 partial sums nobody reads. gather_parameters(params) then
//                 all-gathers a buffer laid out like the gradients (the
//                 masters after the sharded optimizer step), each rank
//                 contributing its pieces: MPI_Iallgather in place, bucket by
//                 bucket, on the calling thread between steps.
// Every element is summed in an order fixed by the ranks' positions (for
// part p of a ring: rank p + 1's value, plus rank p + 2's, ..., plus rank
// p's), never by timing, and every rank receives the same sums: results are
// the same on every rank and from run to run.
// 16-bit messages (options.half_wire, distributed.allreduce_dtype bf16 or
// fp16): each part is rounded to the 16-bit type as it is sent, in grads as
// well, so the sender keeps exactly what the others receive; a received part
// is added in fp32. The sums are fp32 sums of 16-bit-rounded partial sums,
// every rank ends with the same values, and the links carry half the bytes.
#pragma once

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "mpi/bucket_plan.h"
#include "mpi/communicator.h"
#include "mpi/context.h"
#include "mpi/half_wire.h"

namespace mpiasr::mpi {

struct ReducerOptions {
  size_t bucket_bytes = 25 << 20;
  size_t first_bucket_bytes = 1 << 20;
  // Reduce within each node, all-reduce among node leaders, send back within
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
  // The messages' type: fp32 when empty; bf16 or fp16 (mpi/half_wire.h)
  // halve the bytes. Each part is rounded to it when sent, the sender keeping
  // the rounded value, and added in fp32 when received.
  std::optional<HalfWire> half_wire = std::nullopt;
  // Record each bucket's times every step (last_timeline); off: no clock is read.
  bool record_timeline = false;
};

class GradientReducer {
 public:
  // Collective over the world (duplicates communicators). `ctx` and `grads`
  // must outlive the reducer. Needs MPI_THREAD_SERIALIZED or more.
  GradientReducer(const Context& ctx, float* grads, size_t count, ReducerOptions options = {});
  ~GradientReducer();
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
  // CPU seconds the communication thread used in the last step.
  double last_comm_cpu_seconds() const { return last_comm_cpu_seconds_; }
  // Buckets whose reduction started before the last finish() was called.
  size_t last_buckets_started_early() const { return last_started_early_; }
  size_t num_buckets() const { return plan_.num_buckets(); }
  // Bucket i as [offset, offset + count) of grads.
  std::pair<size_t, size_t> bucket_range(size_t i) const { return plan_.bucket_range(i); }
  // With record_timeline, the last step's buckets: ready when the plan handed
  // the bucket out, start when the communication thread posted its first
  // round, end when it saw its last round complete; empty without.
  const std::vector<BucketTimes>& last_timeline() const { return timeline_; }

 private:
  using Clock = std::chrono::steady_clock;

  // One exchange of a bucket cut into `parts` equal parts: send part
  // send_part to each of send_to, receive part recv_part from recv_from (into
  // the scratch buffer and then added to the part when `reduce`, else in place).
  struct Round {
    MPI_Comm comm = MPI_COMM_NULL;
    int parts = 1;
    int send_part = 0;
    std::vector<int> send_to = {};
    int recv_part = 0;
    int recv_from = -1;  // -1: nothing received
    bool reduce = false;
  };
  struct Bucket {
    size_t round = 0;        // the round in flight (or next), this step
    bool in_flight = false;  // posted and not all complete
  };

  // The ring's rounds; all_gather false: its reduce-scatter rounds only.
  void add_ring(MPI_Comm comm, int rank, int size, bool all_gather);
  // Communication thread: waits for steps and runs each to its end.
  void communicate();
  // Counts the buckets the plan hands out now (stamping when, with
  // record_timeline).
  size_t hand_out();
  // Runs the reduction of one step until every bucket is done.
  void reduce_step();
  // Posts bucket b's current round, or marks it done when none is left.
  void post(size_t b);
  // Tests the requests in flight and posts the rounds that follow complete
  // ones; returns whether any round completed.
  bool progress();
  std::pair<float*, int> part(size_t b, int part, int parts) const;

  const Context& ctx_;
  float* grads_;
  BucketPlan plan_;  // used by the calling thread only
  bool shard_ = false;
  std::vector<std::pair<size_t, size_t>> ranges_;  // the plan's buckets: offset, count
  std::vector<Communicator> comms_;
  std::vector<Round> rounds_;       // this rank's, the same for every bucket
  size_t requests_per_bucket_ = 1;  // the most any round posts
  std::vector<float> scratch_;      // received parts before they are added (fp32 messages)
  std::optional<HalfWire> half_wire_;
  std::vector<uint16_t> wire_sent_;      // 16-bit messages: parts as sent, laid out as grads
  std::vector<uint16_t> wire_received_;  // and as received
  int tag_limit_ = 32767;                // MPI_TAG_UB
  bool record_timeline_ = false;
  // ready: the calling thread's; start and end: the communication thread's.
  std::vector<BucketTimes> timeline_;
  double last_wait_seconds_ = 0.0;
  size_t last_started_early_ = 0;

  // Communication thread only.
  std::vector<Bucket> buckets_;
  std::vector<MPI_Request> requests_;  // requests_per_bucket_ per bucket
  std::vector<int> completed_;         // MPI_Testsome's output
  size_t posted_ = 0;                  // buckets posted this step
  size_t done_buckets_ = 0;            // buckets with every round complete

  // Shared between the two threads, under mutex_.
  std::mutex mutex_;
  std::condition_variable wake_;      // the communication thread's: work, close or stop
  std::condition_variable finished_;  // finish()'s: the step is done
  size_t handed_out_ = 0;             // buckets the plan handed out this step
  bool closed_ = false;               // finish() was called: every bucket is handed out
  Clock::time_point closed_at_;
  bool step_done_ = true;
  bool stop_ = false;
  std::exception_ptr error_;
  double last_comm_cpu_seconds_ = 0.0;

  std::thread thread_;  // last: starts after everything above is built
};

}  // namespace mpiasr::mpi
