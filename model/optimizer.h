// AdamW over a ParameterStore, with global-norm gradient clipping and dynamic
// loss scaling decided where the backend computes (kernels/step_control.h):
//
//   g' = g * grad_scale * clip        (grad_scale = 1 / (loss_scale * tokens))
//   m  = b1 m + (1 - b1) g'           v = b2 v + (1 - b2) g'^2
//   w -= lr (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd w)
//
// Weight decay applies to weights only (Linear and Conv weights), never to
// biases or LayerNorm parameters. The buffer is cut into runs of consecutive
// tensors with the same decay that tile it, alignment gaps included (the gaps
// hold zeros in w, g, m and v, so they stay zero); the runs, cut to this
// optimizer's ranges, are the segments of ONE backend adamw_step call (one
// kernel on CUDA), listed once in backend memory. Clipping follows
// torch.nn.utils.clip_grad_norm_: clip = min(1, max_norm / (norm + 1e-6)).
// The compute copy of the weights is refreshed by the same backend call.
//
// A step, with no wait for the device: set_step_inputs(tokens, lr) ->
// (backward, the gradient all-reduce) -> add_grad_sum_squares() -> (the sum
// all-reduced over ranks when sharded) -> decide(rule) -> step(). The
// StepControl (backend memory) holds the loss scale backward multiplies by,
// the loss sum ctc_loss adds to, the scaler's state, AdamW's step count and
// the sums for the progress line; read_control() fetches it (a wait).
//
// Sharding (ZeRO-1, DESIGN.md "Sharded optimizer state"): built with the
// ranges it owns (this rank's pieces of the gradient buckets), the optimizer
// keeps moments for those ranges only, one after the other at each range's
// state_offset, and updates only them; without ranges it owns the whole
// buffer. State for checkpoints: the step count (in the control) and the
// moments, exported by name as adam_m.<name> and adam_v.<name> from their
// flat form (the sharded trainer gathers the ranks' pieces into it first).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <utility>
#include <vector>

#include "kernels/step_control.h"
#include "model/parameters.h"

namespace mpiasr {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.98f;
  float eps = 1e-9f;
  float weight_decay = 1e-3f;
  double clip_norm = 0.0;  // global gradient norm; 0 = no clipping
};

// [offset, offset + count) of the flat parameter buffers, whose moments are
// kept at state_offset of the optimizer's own buffers.
struct OptimizerRange {
  size_t offset = 0, count = 0, state_offset = 0;
};

template <typename Act, typename Acc>
class Optimizer {
 public:
  // ranges: what this optimizer updates, by increasing offset; empty: all of it.
  explicit Optimizer(ParameterStore<Act, Acc>& params, const AdamWConfig& config = {},
                     std::vector<OptimizerRange> ranges = {})
      : params_(params), config_(config), ranges_(std::move(ranges)) {
    MPIASR_CHECK(params.allocated(), "optimizer built over unallocated parameters");
    if (ranges_.empty()) ranges_.push_back({0, params.size(), 0});
    for (const OptimizerRange& range : ranges_) {
      MPIASR_CHECK(range.offset + range.count <= params.size(),
                   "optimizer range [" << range.offset << ", " << range.offset + range.count
                                       << ") outside the " << params.size() << " parameters");
      state_elements_ = std::max(state_elements_, range.state_offset + range.count);
    }
    // Runs of one decay, each from its first tensor to the next run (the
    // first from 0, the last to the end of the buffer).
    std::vector<Run> runs;
    for (const ParameterInfo& info : params.infos()) {
      const bool decay = info.kind == ParameterKind::kWeight;
      if (runs.empty() || runs.back().decay != decay) runs.push_back({info.offset, 0, decay});
    }
    for (size_t r = 0; r < runs.size(); ++r) {
      if (r == 0) runs[r].offset = 0;
      runs[r].count = (r + 1 < runs.size() ? runs[r + 1].offset : params.size()) - runs[r].offset;
    }
    for (const OptimizerRange& range : ranges_) {
      for (const Run& run : runs) {
        const size_t begin = std::max(run.offset, range.offset);
        const size_t end = std::min(run.offset + run.count, range.offset + range.count);
        if (begin >= end) continue;
        segments_.push_back({begin, end - begin, range.state_offset + (begin - range.offset),
                             run.decay ? config_.weight_decay : 0.0f});
      }
    }
    std::sort(segments_.begin(), segments_.end(), [](const AdamWSegment& a, const AdamWSegment& b) {
      return a.state_offset < b.state_offset;
    });
    Backend<Act, Acc>& be = params_.backend();
    device_segments_ = static_cast<AdamWSegment*>(
        be.alloc(std::max<size_t>(segments_.size(), 1) * sizeof(AdamWSegment)));
    be.to_device(device_segments_, segments_.data(), segments_.size() * sizeof(AdamWSegment));
    const size_t bytes = std::max<size_t>(state_elements_, 1) * sizeof(Acc);
    adam_m_ = static_cast<Acc*>(be.alloc(bytes));
    adam_v_ = static_cast<Acc*>(be.alloc(bytes));
    be.zero(adam_m_, bytes);
    be.zero(adam_v_, bytes);
    control_ = static_cast<StepControl*>(be.alloc(sizeof(StepControl)));
    const StepControl initial;
    be.to_device(control_, &initial, sizeof initial);
  }
  ~Optimizer() {
    Backend<Act, Acc>& be = params_.backend();
    for (void* buffer : {static_cast<void*>(adam_m_), static_cast<void*>(adam_v_),
                         static_cast<void*>(control_), static_cast<void*>(device_segments_)}) {
      be.release(buffer);
    }
  }
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // The control in backend memory: its loss scale for backward
  // (&control()->scaler.scale) and loss sum for ctc_loss (&control()->loss_sum).
  StepControl* control() { return control_; }

  // This step's global target-token count and learning rate.
  void set_step_inputs(double loss_divisor, float lr) {
    const StepInputs inputs{loss_divisor, lr};
    params_.backend().to_device(control_, &inputs, sizeof inputs);
  }
  // The control's gradient sum of squares += that of this optimizer's ranges.
  void add_grad_sum_squares() {
    for (const OptimizerRange& range : ranges_) {
      params_.backend().add_sum_squares(&control_->grad_sum_squares, params_.grad() + range.offset,
                                        range.count);
    }
  }
  void decide(const LossScalerRule& scaler) {
    const StepRule rule{scaler, config_.clip_norm, config_.beta1, config_.beta2};
    params_.backend().decide_step(control_, rule);
  }
  // AdamW over the ranges, as decided (nothing when the step was skipped).
  void step() {
    Act* compute = ParameterStore<Act, Acc>::kComputeAliasesMaster ? nullptr : params_.compute();
    const AdamWHyper hyper{config_.beta1, config_.beta2, config_.eps};
    params_.backend().adamw_step(params_.master(), compute, params_.grad(), adam_m_, adam_v_,
                                 device_segments_, int(segments_.size()), state_elements_, hyper,
                                 control_);
  }

  void zero_grad() { params_.zero_grad(); }

  // Waits for the device and returns the control.
  StepControl read_control() {
    StepControl host;
    params_.backend().to_host(&host, control_, sizeof host);
    return host;
  }
  // Zeroes the control's sums (after reading them).
  void clear_sums() {
    params_.backend().zero(reinterpret_cast<char*>(control_) + kStepControlSumsOffset,
                           sizeof(StepControl) - kStepControlSumsOffset);
  }
  // Restores the state a checkpoint kept: AdamW's step count and the scaler's.
  void set_state(int optimizer_step, const LossScalerState& scaler) {
    StepControl host = read_control();
    host.optimizer_step = optimizer_step;
    host.scaler = scaler;
    params_.backend().to_device(control_, &host, sizeof host);
  }

  const AdamWConfig& config() const { return config_; }
  const std::vector<OptimizerRange>& ranges() const { return ranges_; }
  // AdamW's segments, by increasing state offset (host copy).
  const std::vector<AdamWSegment>& segments() const { return segments_; }
  // Elements of each moment buffer: the sum of the ranges' counts.
  size_t state_elements() const { return state_elements_; }

  // The moments of this optimizer's ranges, as kept (m then v, state_elements() each).
  std::vector<Acc> moments_to_host() {
    std::vector<Acc> host(2 * state_elements_);
    Backend<Act, Acc>& be = params_.backend();
    be.to_host(host.data(), adam_m_, state_elements_ * sizeof(Acc));
    be.to_host(host.data() + state_elements_, adam_v_, state_elements_ * sizeof(Acc));
    return host;
  }
  // Checkpoint form of flat moments m, v [params.size()] (all ranks' ranges).
  NamedTensors state_tensors(const std::vector<Acc>& m, const std::vector<Acc>& v) const {
    NamedTensors state = params_.tensors_from_flat(m, "adam_m.");
    state.merge(params_.tensors_from_flat(v, "adam_v."));
    return state;
  }
  // The checkpoint form of an unsharded optimizer's moments.
  NamedTensors export_state() {
    MPIASR_CHECK(state_elements_ == params_.size() && ranges_.size() == 1,
                 "a sharded optimizer's state is gathered by the trainer");
    const std::vector<Acc> host = moments_to_host();
    return state_tensors(std::vector<Acc>(host.begin(), host.begin() + long(state_elements_)),
                         std::vector<Acc>(host.begin() + long(state_elements_), host.end()));
  }
  // Takes this optimizer's ranges of the moments a checkpoint holds by name.
  void import_state(const NamedTensors& state, const std::string& source) {
    const std::vector<Acc> m = params_.flat_from_tensors(state, "adam_m.", source);
    const std::vector<Acc> v = params_.flat_from_tensors(state, "adam_v.", source);
    std::vector<Acc> mine(2 * state_elements_, Acc(0));
    for (const OptimizerRange& range : ranges_) {
      std::copy_n(m.begin() + long(range.offset), range.count,
                  mine.begin() + long(range.state_offset));
      std::copy_n(v.begin() + long(range.offset), range.count,
                  mine.begin() + long(state_elements_ + range.state_offset));
    }
    Backend<Act, Acc>& be = params_.backend();
    be.to_device(adam_m_, mine.data(), state_elements_ * sizeof(Acc));
    be.to_device(adam_v_, mine.data() + state_elements_, state_elements_ * sizeof(Acc));
  }

 private:
  struct Run {
    size_t offset, count;
    bool decay;
  };
  // The control's first fields, which the host writes each step.
  struct StepInputs {
    double loss_divisor;
    float lr;
  };
  static_assert(offsetof(StepControl, loss_divisor) == 0 && offsetof(StepControl, lr) == 8,
                "StepInputs mirrors the start of StepControl");

  ParameterStore<Act, Acc>& params_;
  AdamWConfig config_;
  std::vector<OptimizerRange> ranges_;
  std::vector<AdamWSegment> segments_;
  AdamWSegment* device_segments_ = nullptr;  // backend memory
  size_t state_elements_ = 0;
  Acc* adam_m_ = nullptr;
  Acc* adam_v_ = nullptr;
  StepControl* control_ = nullptr;
};

extern template class Optimizer<float, float>;
extern template class Optimizer<double, double>;

}  // namespace mpiasr
