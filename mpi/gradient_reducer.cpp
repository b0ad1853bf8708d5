#include "mpi/gradient_reducer.h"

#include <algorithm>
#include <chrono>
#include <cstring>

#include "mpi/collectives.h"
#include "mpi/mpi_check.h"
#include "mpi/timeout.h"

namespace mpiasr::mpi {

GradientReducer::GradientReducer(const Context& ctx, float* grads, size_t count,
                                 ReducerOptions options)
    : ctx_(ctx),
      grads_(grads),
      plan_(count, options.bucket_bytes, options.first_bucket_bytes, options.range_alignment,
            "GradientReducer", options.shard ? size_t(ctx.world_size()) : 1) {
  MPIASR_CHECK(grads != nullptr || count == 0, "gradient buffer is null");
  if (options.shard && options.hierarchical) {
    MPIASR_FAIL(ExitCode::kUsage,
                "the sharded optimizer (distributed.zero_stage = 1) reduce-scatters over the "
                "world; it does not work with distributed.hierarchical = true");
  }
  buckets_.resize(plan_.num_buckets());
  requests_.assign(buckets_.size(), MPI_REQUEST_NULL);
  completed_.assign(buckets_.size(), 0);

  if (options.hierarchical) {
    stage_comms_.push_back(Communicator::duplicate(ctx.node_comm()));
    stages_.push_back(Stage::kNodeReduce);
    Communicator leaders = Communicator::duplicate(ctx.leaders_comm());
    if (ctx.is_node_leader()) {
      stage_comms_.push_back(std::move(leaders));
      stages_.push_back(Stage::kLeadersAllreduce);
    }
    stage_comms_.push_back(Communicator::duplicate(ctx.node_comm()));
    stages_.push_back(Stage::kNodeBroadcast);
  } else {
    stage_comms_.push_back(Communicator::duplicate(ctx.world_comm()));
    stages_.push_back(options.shard ? Stage::kWorldReduceScatter : Stage::kWorldAllreduce);
  }
  posted_.assign(stages_.size(), 0);
}

void GradientReducer::begin_step() {
  plan_.begin_step();
  for (Bucket& bucket : buckets_) bucket.stages_done = 0;
  std::fill(posted_.begin(), posted_.end(), 0);
}

void GradientReducer::on_grads_ready(size_t offset, size_t count) {
  plan_.mark_ready(offset, count);
  progress();
}

void GradientReducer::post(size_t b, size_t stage) {
  const auto [begin, count] = plan_.bucket_range(b);
  float* data = grads_ + begin;
  const int n = int(count);
  MPI_Comm comm = stage_comms_[stage].get();
  MPI_Request* request = &requests_[b];
  switch (stages_[stage]) {
    case Stage::kWorldAllreduce:
    case Stage::kLeadersAllreduce:
      MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, n, MPI_FLOAT, MPI_SUM, comm, request));
      break;
    case Stage::kWorldReduceScatter:
      MPI_CHECK(MPI_Ireduce_scatter_block(MPI_IN_PLACE, data, n / ctx_.world_size(), MPI_FLOAT,
                                          MPI_SUM, comm, request));
      break;
    case Stage::kNodeReduce:
      if (ctx_.is_node_leader()) {
        MPI_CHECK(MPI_Ireduce(MPI_IN_PLACE, data, n, MPI_FLOAT, MPI_SUM, 0, comm, request));
      } else {
        MPI_CHECK(MPI_Ireduce(data, nullptr, n, MPI_FLOAT, MPI_SUM, 0, comm, request));
      }
      break;
    case Stage::kNodeBroadcast:
      MPI_CHECK(MPI_Ibcast(data, n, MPI_FLOAT, 0, comm, request));
      break;
  }
  buckets_[b].in_flight = true;
}

void GradientReducer::complete(size_t b, size_t stage) {
  if (stages_[stage] != Stage::kWorldReduceScatter) return;
  const BucketPlan::ShardPiece piece = plan_.shard_piece(b, size_t(ctx_.world_rank()));
  const size_t begin = plan_.bucket_range(b).first;
  if (piece.offset != begin) {
    std::memmove(grads_ + piece.offset, grads_ + begin, piece.count * sizeof(float));
  }
}

bool GradientReducer::progress() {
  for (bool changed = true; changed;) {
    changed = false;
    // The first stage posts what the plan hands out; stage s > 0 posts
    // buckets in index order, the next one when it is done with stage s - 1.
    while (const std::optional<size_t> b = plan_.next_to_start()) {
      post(*b, 0);
      ++posted_[0];
    }
    for (size_t s = 1; s < stages_.size(); ++s) {
      while (posted_[s] < buckets_.size()) {
        const size_t b = posted_[s];
        const Bucket& bucket = buckets_[b];
        if (bucket.in_flight || size_t(bucket.stages_done) != s) break;
        post(b, s);
        ++posted_[s];
      }
    }
    int done = 0;
    MPI_CHECK(MPI_Testsome(int(requests_.size()), requests_.data(), &done, completed_.data(),
                           MPI_STATUSES_IGNORE));
    if (done == MPI_UNDEFINED) done = 0;
    for (int i = 0; i < done; ++i) {
      const size_t b = size_t(completed_[size_t(i)]);
      Bucket& bucket = buckets_[b];
      bucket.in_flight = false;
      complete(b, size_t(bucket.stages_done));
      ++bucket.stages_done;
      changed = true;
    }
  }
  return posted_.back() == buckets_.size() &&
         std::none_of(buckets_.begin(), buckets_.end(),
                      [](const Bucket& bucket) { return bucket.in_flight; });
}

void GradientReducer::finish() {
  const auto start = std::chrono::steady_clock::now();
  last_started_early_ = plan_.started();
  plan_.end_step();
  poll_or_abort(
      ctx_, [this] { return progress(); }, "gradient all-reduce");
  last_wait_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void GradientReducer::sum_over_ranks(double* value) {
  *value = allreduce_sum(ctx_, *value, "gradient norm all-reduce");
}

void GradientReducer::gather_parameters(float* params) {
  MPIASR_CHECK(stages_.front() == Stage::kWorldReduceScatter,
               "GradientReducer::gather_parameters without shard = true");
  MPI_Comm comm = stage_comms_.front().get();
  for (size_t b = 0; b < plan_.num_buckets(); ++b) {
    const auto [begin, count] = plan_.bucket_range(b);
    MPI_CHECK(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, params + begin,
                             int(count / plan_.shards()), MPI_FLOAT, comm, &requests_[b]));
  }
  wait_or_abort(ctx_, requests_, "parameter all-gather");
}

}  // namespace mpiasr::mpi
