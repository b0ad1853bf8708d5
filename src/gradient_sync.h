// GradientSync: what the training loop needs from the gradient all-reduce,
// whichever backend holds the gradients: mpi::GradientReducer (host memory,
// MPI; the CPU backend) or mpi::NcclGradientReducer (device memory, NCCL; the
// CUDA backend). Both follow one step protocol: begin_step(), then
// on_grads_ready(offset, count) as backward finishes each layer, then finish(),
// after which the buffer holds the sum over ranks (for the work queued after
// it: the NCCL reducer does not wait for the device). last_comm_cpu_seconds()
// is the CPU time the reducer's own thread used in the last step (0 for NCCL,
// which progresses on the GPU).
//
// Sharded (ZeRO-1, DESIGN.md "Sharded optimizer state"): finish() leaves the
// sum only in this rank's pieces of the buffer (shard_ranges(), where its
// optimizer works), sum_over_ranks adds up the optimizer's partial gradient
// norm, and gather_parameters brings every rank's updated pieces of the
// weights to every rank.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>
#include <vector>

#include "model/optimizer.h"
#include "model/parameters.h"
#include "mpi/gradient_reducer.h"
#include "src/base/error.h"
#include "src/config.h"

namespace mpiasr {

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  virtual void begin_step() = 0;
  virtual void on_grads_ready(size_t offset, size_t count) = 0;
  virtual void finish() = 0;
  virtual double last_comm_cpu_seconds() const = 0;
  // The last step's buckets, in index order, when the reducer was made to
  // record them (output.timeline); empty otherwise.
  virtual std::vector<mpi::BucketTimes> last_timeline() const = 0;
  // Sharded only: rank `rank`'s pieces, with their place in its optimizer state.
  virtual std::vector<OptimizerRange> shard_ranges(int rank) const = 0;
  // Sharded only: *value (a double where the gradients live) summed over ranks.
  virtual void sum_over_ranks(double* value) = 0;
  // Sharded only: every rank's pieces of params [count] to every rank.
  virtual void gather_parameters(float* params) = 0;
};

// A GradientSync over a reducer type with the step methods above and the
// sharded ones (plan, sum_over_ranks, gather_parameters): the MPI reducer
// (mpi/gradient_reducer.h) or the NCCL one (mpi/cuda/nccl_gradient_reducer.h).
template <typename Reducer>
class ReducerSync final : public GradientSync {
 public:
  template <typename... Args>
  explicit ReducerSync(Args&&... args) : reducer_(std::forward<Args>(args)...) {}
  void begin_step() override { reducer_.begin_step(); }
  void on_grads_ready(size_t offset, size_t count) override {
    reducer_.on_grads_ready(offset, count);
  }
  void finish() override { reducer_.finish(); }
  double last_comm_cpu_seconds() const override { return reducer_.last_comm_cpu_seconds(); }
  std::vector<mpi::BucketTimes> last_timeline() const override { return reducer_.last_timeline(); }
  std::vector<OptimizerRange> shard_ranges(int rank) const override {
    std::vector<OptimizerRange> ranges;
    for (const mpi::BucketPlan::ShardPiece& piece : reducer_.plan().shard_pieces(size_t(rank))) {
      ranges.push_back({piece.offset, piece.count, piece.state_offset});
    }
    return ranges;
  }
  void sum_over_ranks(double* value) override { reducer_.sum_over_ranks(value); }
  void gather_parameters(float* params) override { reducer_.gather_parameters(params); }

 private:
  Reducer reducer_;
};

// The MPI reducer's options from distributed.* (bucket sizes in MiB,
// hierarchical, sharded for zero_stage 1, 16-bit messages, output.timeline), its
// ranges aligned to the parameter store's padding.
inline mpi::ReducerOptions reducer_options(const Config& config) {
  mpi::ReducerOptions reducer;
  reducer.bucket_bytes = size_t(config.distributed.bucket_mb * (1 << 20));
  reducer.first_bucket_bytes = size_t(config.distributed.first_bucket_mb * (1 << 20));
  reducer.hierarchical = config.distributed.hierarchical;
  reducer.range_alignment = kParameterAlignment;
  reducer.shard = config.distributed.zero_stage == 1;
  reducer.record_timeline = config.output.timeline;
  if (config.distributed.allreduce_dtype == AllreduceDtype::kBf16) {
    reducer.half_wire = mpi::HalfWire::kBf16;
  } else if (config.distributed.allreduce_dtype == AllreduceDtype::kFp16) {
    reducer.half_wire = mpi::HalfWire::kFp16;
  }
  return reducer;
}

// Makes the all-reduce of a multi-rank run for the flat gradient buffer
// grads [count] (where the backend keeps it).
using GradientSyncFactory =
    std::function<std::unique_ptr<GradientSync>(float* grads, size_t count)>;

}  // namespace mpiasr
