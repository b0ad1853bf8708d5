// BucketPlan: the buckets of a gradient all-reduce and when each may start,
// the part that the MPI reducer (mpi/gradient_reducer.h) and the NCCL reducer
// (mpi/cuda/nccl_gradient_reducer.h) share; they differ only in how a bucket
// is reduced.
//
// Buckets. The flat gradient buffer grads[0, count) is cut from its END,
// because backward finishes the last layers first:
//   bucket 0 = [count - F, count), bucket 1 = [count - F - B, count - F), ...
// with F = first_bucket_bytes / 4 elements (small, so communication starts
// early) and B = bucket_bytes / 4; the last bucket ends at element 0 and may be
// shorter.
//
// A step: begin_step(); mark_ready(offset, n) for each range that backward has
// made final (any order, no overlaps; the end is rounded up to a multiple of
// range_alignment elements, clamped to count, so the padding after a layer
// counts as ready with it); next_to_start() hands out the buckets in index
// order, each once all its elements are marked, so every rank starts the same
// reductions in the same order whatever the timing; end_step() marks what is
// left (unmarked elements are padding) and closes the step, after which
// next_to_start() hands out the rest. Misuse (a range outside the buffer or
// marked twice, calls out of order) throws Error naming the reducer.
//
// Shards (ZeRO-1, DESIGN.md "Sharded optimizer state"). With `shards` = W > 1
// the optimizer state is split over W ranks, and so is every bucket: shard r
// of a bucket [begin, begin + c) is [begin + r c / W, begin + (r + 1) c / W).
// A reduce-scatter of the bucket leaves the sum of shard r on rank r, an
// in-place all-gather gives every rank the whole bucket back; both are
// collectives on equal pieces (MPI_Reduce_scatter_block, ncclReduceScatter).
// For that, F and B are rounded up to multiples of W x range_alignment, and
// count must be one (ParameterStore pads its buffers so). Rank r's pieces,
// one per bucket, are stored one after the other in its compact optimizer
// state: the piece of the bucket at `begin` lands at begin / W there.
#pragma once

#include <chrono>
#include <cstddef>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mpiasr::mpi {

// One bucket of a step's reduction as a reducer records it when asked to
// (record_timeline in its options): the bucket's bytes of fp32 gradients,
// when the plan handed it out, when its reduction started and when it ended
// (DESIGN.md, "The step's timeline", says what each is on the CPU and with NCCL).
struct BucketTimes {
  size_t bytes = 0;
  std::chrono::steady_clock::time_point ready = {}, start = {}, end = {};
};

class BucketPlan {
 public:
  // `owner` names the reducer in error messages.
  BucketPlan(size_t count, size_t bucket_bytes, size_t first_bucket_bytes, size_t range_alignment,
             std::string owner, size_t shards = 1);

  size_t num_buckets() const { return buckets_.size(); }
  // Bucket i as [offset, offset + count) of the buffer.
  std::pair<size_t, size_t> bucket_range(size_t i) const;

  // One piece of a shard: [offset, offset + count) of the buffer, kept at
  // state_offset of the shard's compact storage.
  struct ShardPiece {
    size_t offset = 0, count = 0, state_offset = 0;
    bool operator==(const ShardPiece&) const = default;
  };
  size_t shards() const { return shards_; }
  // Elements of each shard's compact storage: count / shards.
  size_t shard_elements() const { return count_ / shards_; }
  // Shard `shard` of bucket i.
  ShardPiece shard_piece(size_t i, size_t shard) const;
  // Every piece of shard `shard`, by increasing offset (and state_offset).
  std::vector<ShardPiece> shard_pieces(size_t shard) const;

  void begin_step();
  void mark_ready(size_t offset, size_t count);
  // The next bucket, in index order, whose elements are all marked and that
  // was not handed out yet this step; none when the next one is not complete.
  std::optional<size_t> next_to_start();
  // Buckets handed out this step.
  size_t started() const { return started_; }
  void end_step();

 private:
  struct Bucket {
    size_t begin = 0;
    size_t count = 0;
    size_t ready = 0;  // elements marked this step
  };

  size_t bucket_of(size_t element) const;

  size_t count_;
  size_t shards_;
  size_t bucket_elements_;
  size_t range_alignment_;
  std::string owner_;
  std::vector<Bucket> buckets_;
  std::map<size_t, size_t> marked_;  // ranges marked this step: begin -> end
  size_t started_ = 0;
  bool in_step_ = false;
};

}  // namespace mpiasr::mpi
