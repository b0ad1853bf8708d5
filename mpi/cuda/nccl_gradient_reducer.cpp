// Bucketed NCCL all-reduce of the gradients, ordered after backward by
// events (see nccl_gradient_reducer.h).
#include "mpi/cuda/nccl_gradient_reducer.h"

#include <algorithm>
#include <chrono>
#include <iterator>

#include "src/base/error.h"

namespace mpiasr::mpi {

namespace {

size_t elements_of(size_t bytes, const char* what) {
  MPIASR_CHECK(bytes >= sizeof(float), what << " must be at least 4 bytes, got " << bytes);
  return bytes / sizeof(float);
}

}  // namespace

NcclGradientReducer::NcclGradientReducer(NcclCommunicator& comm, cudaStream_t compute_stream,
                                         float* grads, size_t count, NcclReducerOptions options)
    : comm_(comm),
      compute_stream_(compute_stream),
      grads_(grads),
      count_(count),
      options_(options) {
  MPIASR_CHECK(grads != nullptr || count == 0, "gradient buffer is null");
  MPIASR_CHECK(options.range_alignment >= 1, "range_alignment must be at least 1");
  const size_t first = elements_of(options.first_bucket_bytes, "first_bucket_bytes");
  const size_t rest = elements_of(options.bucket_bytes, "bucket_bytes");
  for (size_t end = count; end > 0;) {
    const size_t size = std::min(end, buckets_.empty() ? first : rest);
    buckets_.push_back({.begin = end - size, .count = size});
    end -= size;
  }
  ready_events_.resize(buckets_.size());
}

std::pair<size_t, size_t> NcclGradientReducer::bucket_range(size_t i) const {
  const Bucket& bucket = buckets_.at(i);
  return {bucket.begin, bucket.count};
}

size_t NcclGradientReducer::bucket_of(size_t element) const {
  const size_t first = buckets_.front().count;
  if (element >= count_ - first) return 0;
  return 1 + (count_ - first - 1 - element) / (options_.bucket_bytes / sizeof(float));
}

void NcclGradientReducer::begin_step() {
  MPIASR_CHECK(!in_step_, "NcclGradientReducer::begin_step called again before finish()");
  for (Bucket& bucket : buckets_) bucket.ready = 0;
  started_ = 0;
  marked_.clear();
  in_step_ = true;
}

void NcclGradientReducer::on_grads_ready(size_t offset, size_t count) {
  MPIASR_CHECK(in_step_,
               "NcclGradientReducer::on_grads_ready called outside begin_step()/finish()");
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
  start_ready_buckets();
}

void NcclGradientReducer::start_ready_buckets() {
  while (started_ < buckets_.size() && buckets_[started_].ready == buckets_[started_].count) {
    const Bucket& bucket = buckets_[started_];
    const CudaEvent& ready = ready_events_[started_];
    ready.record(compute_stream_);
    ready.wait_on(comm_stream_.get());
    float* data = grads_ + bucket.begin;
    comm_.complete(ncclAllReduce(data, data, bucket.count, ncclFloat32, ncclSum, comm_.get(),
                                 comm_stream_.get()),
                   "gradient all-reduce");
    ++started_;
  }
}

void NcclGradientReducer::finish() {
  MPIASR_CHECK(in_step_, "NcclGradientReducer::finish called without begin_step()");
  const auto start = std::chrono::steady_clock::now();
  last_started_early_ = started_;
  for (Bucket& bucket : buckets_) bucket.ready = bucket.count;
  start_ready_buckets();
  done_event_.record(comm_stream_.get());
  done_event_.wait_on(compute_stream_);
  comm_.wait([this] { return done_event_.done(); }, "gradient all-reduce");
  in_step_ = false;
  last_wait_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace mpiasr::mpi
