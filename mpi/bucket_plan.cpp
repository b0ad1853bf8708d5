// Buckets cut from the end of the gradient buffer, marked ranges and the
// in-order start of complete buckets (see bucket_plan.h).
#include "mpi/bucket_plan.h"

#include <algorithm>
#include <climits>
#include <iterator>

#include "src/base/error.h"

namespace mpiasr::mpi {

namespace {

// Elements of a bucket of `bytes`; MPI counts are ints, so at most INT_MAX.
size_t elements_of(size_t bytes, const char* what) {
  MPIASR_CHECK(bytes >= sizeof(float), what << " must be at least 4 bytes, got " << bytes);
  const size_t elements = bytes / sizeof(float);
  MPIASR_CHECK(elements <= size_t(INT_MAX),
               what << " of " << bytes << " bytes exceeds MPI's count");
  return elements;
}

// `elements` rounded up to a multiple of `granule`.
size_t round_up(size_t elements, size_t granule) {
  return (elements + granule - 1) / granule * granule;
}

}  // namespace

BucketPlan::BucketPlan(size_t count, size_t bucket_bytes, size_t first_bucket_bytes,
                       size_t range_alignment, std::string owner, size_t shards)
    : count_(count),
      shards_(shards),
      bucket_elements_(elements_of(bucket_bytes, "bucket_bytes")),
      range_alignment_(range_alignment),
      owner_(std::move(owner)) {
  MPIASR_CHECK(range_alignment >= 1, "range_alignment must be at least 1");
  MPIASR_CHECK(shards >= 1, "shards must be at least 1");
  size_t first = elements_of(first_bucket_bytes, "first_bucket_bytes");
  if (shards > 1) {
    const size_t granule = shards * range_alignment;
    MPIASR_CHECK(count % granule == 0,
                 owner_ << ": a buffer of " << count << " elements cannot be cut into " << shards
                        << " shards of whole " << range_alignment << "-element pieces");
    first = round_up(first, granule);
    bucket_elements_ = round_up(bucket_elements_, granule);
    MPIASR_CHECK(bucket_elements_ <= size_t(INT_MAX),
                 "bucket_bytes rounded to " << bucket_elements_ << " elements exceeds MPI's count");
  }
  for (size_t end = count; end > 0;) {
    const size_t size = std::min(end, buckets_.empty() ? first : bucket_elements_);
    buckets_.push_back({.begin = end - size, .count = size});
    end -= size;
  }
}

std::pair<size_t, size_t> BucketPlan::bucket_range(size_t i) const {
  const Bucket& bucket = buckets_.at(i);
  return {bucket.begin, bucket.count};
}

BucketPlan::ShardPiece BucketPlan::shard_piece(size_t i, size_t shard) const {
  const Bucket& bucket = buckets_.at(i);
  MPIASR_CHECK(shard < shards_, "shard " << shard << " of " << shards_);
  const size_t piece = bucket.count / shards_;
  return {bucket.begin + shard * piece, piece, bucket.begin / shards_};
}

std::vector<BucketPlan::ShardPiece> BucketPlan::shard_pieces(size_t shard) const {
  std::vector<ShardPiece> pieces;
  for (size_t i = buckets_.size(); i-- > 0;) pieces.push_back(shard_piece(i, shard));
  return pieces;
}

size_t BucketPlan::bucket_of(size_t element) const {
  const size_t first = buckets_.front().count;
  if (element >= count_ - first) return 0;
  return 1 + (count_ - first - 1 - element) / bucket_elements_;
}

void BucketPlan::begin_step() {
  MPIASR_CHECK(!in_step_, owner_ << "::begin_step called again before finish()");
  for (Bucket& bucket : buckets_) bucket.ready = 0;
  marked_.clear();
  started_ = 0;
  in_step_ = true;
}

void BucketPlan::mark_ready(size_t offset, size_t count) {
  MPIASR_CHECK(in_step_, owner_ << "::on_grads_ready called outside begin_step()/finish()");
  MPIASR_CHECK(offset <= count_ && count <= count_ - offset,
               "gradient range [" << offset << ", " << offset + count << ") is outside [0, "
                                  << count_ << ")");
  if (count == 0) return;
  const size_t align = range_alignment_;
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
}

std::optional<size_t> BucketPlan::next_to_start() {
  if (started_ == buckets_.size()) return std::nullopt;
  const Bucket& bucket = buckets_[started_];
  if (bucket.ready != bucket.count) return std::nullopt;
  return started_++;
}

void BucketPlan::end_step() {
  MPIASR_CHECK(in_step_, owner_ << "::finish called without begin_step()");
  for (Bucket& bucket : buckets_) bucket.ready = bucket.count;
  in_step_ = false;
}

}  // namespace mpiasr::mpi
