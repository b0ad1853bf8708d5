// Bucketed NCCL all-reduce of the gradients, ordered after backward by
// events (see nccl_gradient_reducer.h).
#include "mpi/cuda/nccl_gradient_reducer.h"

#include <chrono>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/cuda/elementwise.h"

#include "src/base/error.h"

namespace mpiasr::mpi {

NcclGradientReducer::NcclGradientReducer(NcclCommunicator& comm, cudaStream_t compute_stream,
                                         float* grads, size_t count, NcclReducerOptions options)
    : comm_(comm),
      compute_stream_(compute_stream),
      grads_(grads),
      wire_(options.wire),
      wire_buffer_(options.wire_buffer),
      shard_(options.shard),
      record_timeline_(options.record_timeline),
      plan_(count, options.bucket_bytes, options.first_bucket_bytes, options.range_alignment,
            "NcclGradientReducer", options.shard ? size_t(comm.size()) : 1) {
  MPIASR_CHECK(grads != nullptr || count == 0, "gradient buffer is null");
  MPIASR_CHECK(wire_ == ncclFloat32 || wire_ == ncclBfloat16 || wire_ == ncclFloat16,
               "gradient all-reduce in NCCL type " << int(wire_));
  MPIASR_CHECK(wire_ == ncclFloat32 || wire_buffer_ != nullptr || count == 0,
               "a 16-bit gradient all-reduce needs a wire buffer");
  ready_events_.resize(plan_.num_buckets());
  if (record_timeline_) {
    bucket_done_events_.resize(plan_.num_buckets());
    for (size_t b = 0; b < plan_.num_buckets(); ++b) {
      timeline_.push_back({.bytes = plan_.bucket_range(b).second * sizeof(float)});
    }
  }
}

void NcclGradientReducer::begin_step() {
  plan_.begin_step();
  stamped_ = 0;
}

void NcclGradientReducer::on_grads_ready(size_t offset, size_t count) {
  plan_.mark_ready(offset, count);
  start_ready_buckets();
}

void NcclGradientReducer::start_ready_buckets() {
  while (const std::optional<size_t> b = plan_.next_to_start()) {
    const auto [begin, count] = plan_.bucket_range(*b);
    const CudaEvent& ready = ready_events_[*b];
    if (record_timeline_) timeline_[*b].ready = std::chrono::steady_clock::now();
    ready.record(compute_stream_);
    ready.wait_on(comm_stream_.get());
    reduce_bucket(begin, count);
    if (record_timeline_) {
      timeline_[*b].start = std::chrono::steady_clock::now();
      bucket_done_events_[*b].record(comm_stream_.get());
    }
  }
}

bool NcclGradientReducer::stamp_done_buckets() {
  for (; stamped_ < timeline_.size() && bucket_done_events_[stamped_].done(); ++stamped_) {
    timeline_[stamped_].end = std::chrono::steady_clock::now();
  }
  return stamped_ == timeline_.size();
}

void NcclGradientReducer::reduce_bucket(size_t begin, size_t count) {
  float* data = grads_ + begin;
  if (wire_ == ncclBfloat16) {
    reduce_on_wire(static_cast<__nv_bfloat16*>(wire_buffer_) + begin, data, count);
  } else if (wire_ == ncclFloat16) {
    reduce_on_wire(static_cast<__half*>(wire_buffer_) + begin, data, count);
  } else if (shard_) {
    // In place: rank r's piece is data + r piece, its receive buffer.
    const size_t piece = count / plan_.shards();
    comm_.complete(ncclReduceScatter(data, data + size_t(comm_.rank()) * piece, piece, ncclFloat32,
                                     ncclSum, comm_.get(), comm_stream_.get()),
                   "gradient reduce-scatter");
  } else {
    comm_.complete(
        ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_.get(), comm_stream_.get()),
        "gradient all-reduce");
  }
}

template <typename Wire>
void NcclGradientReducer::reduce_on_wire(Wire* wire, float* data, size_t count) {
  const cudaStream_t stream = comm_stream_.get();
  cuda_cast(wire, data, count, stream);
  if (shard_) {
    const size_t piece = count / plan_.shards(), mine = size_t(comm_.rank()) * piece;
    comm_.complete(ncclReduceScatter(wire, wire + mine, piece, wire_, ncclSum, comm_.get(), stream),
                   "gradient reduce-scatter");
    cuda_cast(data + mine, wire + mine, piece, stream);
    return;
  }
  comm_.complete(ncclAllReduce(wire, wire, count, wire_, ncclSum, comm_.get(), stream),
                 "gradient all-reduce");
  cuda_cast(data, wire, count, stream);
}

void NcclGradientReducer::finish() {
  const auto start = std::chrono::steady_clock::now();
  last_started_early_ = plan_.started();
  plan_.end_step();
  start_ready_buckets();
  done_event_.record(comm_stream_.get());
  done_event_.wait_on(compute_stream_);
  if (record_timeline_) {
    comm_.wait([this] { return stamp_done_buckets() && done_event_.done(); },
               "gradient all-reduce");
  } else {
    comm_.wait([this] { return done_event_.done(); }, "gradient all-reduce");
  }
  last_wait_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void NcclGradientReducer::sum_over_ranks(double* value) {
  MPIASR_CHECK(shard_, "NcclGradientReducer::sum_over_ranks without shard = true");
  comm_.complete(ncclAllReduce(value, value, 1, ncclFloat64, ncclSum, comm_.get(), compute_stream_),
                 "gradient norm all-reduce");
}

void NcclGradientReducer::gather_parameters(float* params) {
  MPIASR_CHECK(shard_, "NcclGradientReducer::gather_parameters without shard = true");
  for (size_t b = 0; b < plan_.num_buckets(); ++b) {
    const auto [begin, count] = plan_.bucket_range(b);
    const size_t piece = count / plan_.shards();
    float* bucket = params + begin;
    // In place: the send buffer is this rank's piece of the receive buffer.
    comm_.complete(ncclAllGather(bucket + size_t(comm_.rank()) * piece, bucket, piece, ncclFloat32,
                                 comm_.get(), compute_stream_),
                   "parameter all-gather");
  }
}

}  // namespace mpiasr::mpi
