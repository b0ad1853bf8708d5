// GradientSync: what the training loop needs from the gradient all-reduce,
// whichever backend holds the gradients: mpi::GradientReducer (host memory,
// MPI; the CPU backend) or mpi::NcclGradientReducer (device memory, NCCL; the
// CUDA backend). Both follow one step protocol: begin_step(), then
// on_grads_ready(offset, count) as backward finishes each layer, then finish(),
// after which the buffer holds the sum over ranks. last_comm_cpu_seconds() is
// the CPU time the reducer's own thread used in the last step (0 for NCCL,
// which progresses on the GPU).
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <utility>

#include "model/parameters.h"
#include "mpi/gradient_reducer.h"
#include "src/config.h"

namespace mpiasr {

class GradientSync {
 public:
  virtual ~GradientSync() = default;
  virtual void begin_step() = 0;
  virtual void on_grads_ready(size_t offset, size_t count) = 0;
  virtual void finish() = 0;
  virtual double last_comm_cpu_seconds() const = 0;
};

// A GradientSync over a reducer type with those three methods.
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

 private:
  Reducer reducer_;
};

// The MPI reducer's options from distributed.* (bucket sizes in MiB,
// hierarchical), its ranges aligned to the parameter store's padding.
inline mpi::ReducerOptions reducer_options(const Config& config) {
  mpi::ReducerOptions reducer;
  reducer.bucket_bytes = size_t(config.distributed.bucket_mb * (1 << 20));
  reducer.first_bucket_bytes = size_t(config.distributed.first_bucket_mb * (1 << 20));
  reducer.hierarchical = config.distributed.hierarchical;
  reducer.range_alignment = kParameterAlignment;
  return reducer;
}

// Makes the all-reduce of a multi-rank run for the flat gradient buffer
// grads [count] (where the backend keeps it).
using GradientSyncFactory =
    std::function<std::unique_ptr<GradientSync>(float* grads, size_t count)>;

}  // namespace mpiasr
