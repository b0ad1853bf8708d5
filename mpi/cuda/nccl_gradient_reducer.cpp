// Bucketed NCCL all-reduce of the gradients, ordered after backward by
// events (see nccl_gradient_reducer.h).
#include "mpi/cuda/nccl_gradient_reducer.h"

#include <chrono>

#include "src/base/error.h"

namespace mpiasr::mpi {

NcclGradientReducer::NcclGradientReducer(NcclCommunicator& comm, cudaStream_t compute_stream,
                                         float* grads, size_t count, NcclReducerOptions options)
    : comm_(comm),
      compute_stream_(compute_stream),
      grads_(grads),
      plan_(count, options.bucket_bytes, options.first_bucket_bytes, options.range_alignment,
            "NcclGradientReducer") {
  MPIASR_CHECK(grads != nullptr || count == 0, "gradient buffer is null");
  ready_events_.resize(plan_.num_buckets());
}

void NcclGradientReducer::begin_step() {
  plan_.begin_step();
}

void NcclGradientReducer::on_grads_ready(size_t offset, size_t count) {
  plan_.mark_ready(offset, count);
  start_ready_buckets();
}

void NcclGradientReducer::start_ready_buckets() {
  while (const std::optional<size_t> b = plan_.next_to_start()) {
    const auto [begin, count] = plan_.bucket_range(*b);
    const CudaEvent& ready = ready_events_[*b];
    ready.record(compute_stream_);
    ready.wait_on(comm_stream_.get());
    float* data = grads_ + begin;
    comm_.complete(
        ncclAllReduce(data, data, count, ncclFloat32, ncclSum, comm_.get(), comm_stream_.get()),
        "gradient all-reduce");
  }
}

void NcclGradientReducer::finish() {
  const auto start = std::chrono::steady_clock::now();
  last_started_early_ = plan_.started();
  plan_.end_step();
  start_ready_buckets();
  done_event_.record(comm_stream_.get());
  done_event_.wait_on(compute_stream_);
  comm_.wait([this] { return done_event_.done(); }, "gradient all-reduce");
  last_wait_seconds_ =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace mpiasr::mpi
