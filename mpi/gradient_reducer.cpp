#include "mpi/gradient_reducer.h"

#include <algorithm>
#include <chrono>
#include <climits>

#include "mpi/mpi_check.h"
#include "mpi/timeout.h"

namespace mpiasr::mpi {

namespace {

size_t elements_of(size_t bytes, const char* what) {
  MPIASR_CHECK(bytes >= sizeof(float), what << " must be at least 4 bytes, got " << bytes);
  const size_t elements = bytes / sizeof(float);
  MPIASR_CHECK(elements <= size_t(INT_MAX),
               what << " of " << bytes << " bytes exceeds MPI's count");
  return elements;
}

}  // namespace

GradientReducer::GradientReducer(const Context& ctx, float* grads, size_t count,
                                 ReducerOptions options)
    : ctx_(ctx), grads_(grads), count_(count), options_(options) {
  MPIASR_CHECK(grads != nullptr || count == 0, "gradient buffer is null");
  MPIASR_CHECK(options.range_alignment >= 1, "range_alignment must be at least 1");
  const size_t first = elements_of(options.first_bucket_bytes, "first_bucket_bytes");
  const size_t rest = elements_of(options.bucket_bytes, "bucket_bytes");
  for (size_t end = count; end > 0;) {
    const size_t size = std::min(end, buckets_.empty() ? first : rest);
    buckets_.push_back({.begin = end - size, .count = size});
    end -= size;
  }
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
    stages_.push_back(Stage::kWorldAllreduce);
  }
  posted_.assign(stages_.size(), 0);
}

std::pair<size_t, size_t> GradientReducer::bucket_range(size_t i) const {
  const Bucket& bucket = buckets_.at(i);
  return {bucket.begin, bucket.count};
}

size_t GradientReducer::bucket_of(size_t element) const {
  const size_t first = buckets_.front().count;
  if (element >= count_ - first) return 0;
  return 1 + (count_ - first - 1 - element) / (options_.bucket_bytes / sizeof(float));
}

void GradientReducer::begin_step() {
  MPIASR_CHECK(!in_step_, "GradientReducer::begin_step called again before finish()");
  for (Bucket& bucket : buckets_) bucket.ready = 0, bucket.stages_done = 0;
  std::fill(posted_.begin(), posted_.end(), 0);
  marked_.clear();
  in_step_ = true;
}

void GradientReducer::on_grads_ready(size_t offset, size_t count) {
  MPIASR_CHECK(in_step_, "GradientReducer::on_grads_ready called outside begin_step()/finish()");
  MPIASR_CHECK(offset <= count_ && count <= count_ - offset,
               "gradient range [" << offset << ", " << offset + count << ") is outside [0, "
                                  << count_ << ")");
  if (count == 0) return;
  const size_t align = options_.range_alignment;
  const size_t end = std::min(count_, (offset + count + align - 1) / align * align);

  auto next = marked_.upper_bound(offset);
  const bool overlaps_previous = next != marked_.begin() && std::prev(next)->second > offset;
  const bool overlaps_next = next != marked_.end() && next->first < end;
  MPIASR_CHECK(!overlaps_previous && !overlaps_next,
               "gradient range [" << offset << ", " << end << ") was already marked ready in part");
  marked_.emplace(offset, end);

  for (size_t b = bucket_of(end - 1); b <= bucket_of(offset); ++b) {
    Bucket& bucket = buckets_[b];
    bucket.ready += std::min(end, bucket.begin + bucket.count) - std::max(offset, bucket.begin);
  }
  progress();
}

void GradientReducer::post(size_t b, size_t stage) {
  Bucket& bucket = buckets_[b];
  float* data = grads_ + bucket.begin;
  const int n = int(bucket.count);
  MPI_Comm comm = stage_comms_[stage].get();
  MPI_Request* request = &requests_[b];
  switch (stages_[stage]) {
    case Stage::kWorldAllreduce:
    case Stage::kLeadersAllreduce:
      MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, data, n, MPI_FLOAT, MPI_SUM, comm, request));
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
  bucket.in_flight = true;
}

bool GradientReducer::progress() {
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t s = 0; s < stages_.size(); ++s) {
      // Stage s posts buckets in index order: the next one when it is free,
      // done with stage s - 1 and, for the first stage, completely marked.
      while (posted_[s] < buckets_.size()) {
        const size_t b = posted_[s];
        const Bucket& bucket = buckets_[b];
        const bool marked = s > 0 || bucket.ready == bucket.count;
        if (bucket.in_flight || size_t(bucket.stages_done) != s || !marked) break;
        post(b, s);
        ++posted_[s];
      }
    }
    int done = 0;
    MPI_CHECK(MPI_Testsome(int(requests_.size()), requests_.data(), &done, completed_.data(),
                           MPI_STATUSES_IGNORE));
    if (done == MPI_UNDEFINED) done = 0;
    for (int i = 0; i < done; ++i) {
      Bucket& bucket = buckets_[size_t(completed_[size_t(i)])];
      bucket.in_flight = false;
      ++bucket.stages_done;
      changed = true;
    }
  }
  return posted_.back() == buckets_.size() &&
         std::none_of(buckets_.begin(), buckets_.end(),
                      [](const Bucket& bucket) { return bucket.in_flight; });
}

void GradientReducer::finish() {
  MPIASR_CHECK(in_step_, "GradientReducer::finish called without begin_step()");
  const auto start = std::chrono::steady_clock::now();
  last_started_early_ = posted_.front();
  for (Bucket& bucket : buckets_) bucket.ready = bucket.count;
  poll_or_abort(
      ctx_, [this] { return progress(); }, "gradient all-reduce");
  in_step_ = false;
  last_wait_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace mpiasr::mpi
