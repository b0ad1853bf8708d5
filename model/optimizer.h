// AdamW over a ParameterStore, with global-norm gradient clipping.
//
//   g' = g * grad_scale * clip        (grad_scale = 1 / loss_scale)
//   m  = b1 m + (1 - b1) g'           v = b2 v + (1 - b2) g'^2
//   w -= lr (m / (1 - b1^t) / (sqrt(v / (1 - b2^t)) + eps) + wd w)
//
// Weight decay applies to weights only (Linear and Conv weights), never to
// biases or LayerNorm parameters. Tensors are updated in runs of consecutive
// tensors with the same decay (the store's alignment gaps hold zeros in w, g,
// m and v, so they stay zero). Clipping follows torch.nn.utils.clip_grad_norm_:
// clip = min(1, max_norm / (norm + 1e-6)). The compute copy of the weights is
// refreshed by the same backend call. State: the step count and the moments
// (in the store), exported by name as adam_m.<name> and adam_v.<name>.
#pragma once

#include <algorithm>
#include <cmath>
#include <vector>

#include "model/parameters.h"

namespace mpiasr {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.98f;
  float eps = 1e-9f;
  float weight_decay = 1e-3f;
};

template <typename Act, typename Acc>
class Optimizer {
 public:
  explicit Optimizer(ParameterStore<Act, Acc>& params, const AdamWConfig& config = {})
      : params_(params), config_(config) {
    MPIASR_CHECK(params.allocated(), "optimizer built over unallocated parameters");
    for (const ParameterInfo& info : params.infos()) {
      const bool decay = info.kind == ParameterKind::kWeight;
      const size_t end = info.offset + info.count;
      if (!runs_.empty() && runs_.back().decay == decay) {
        runs_.back().count = end - runs_.back().offset;
      } else {
        runs_.push_back({info.offset, info.count, decay});
      }
    }
  }

  // L2 norm of the whole gradient times grad_scale (1 / loss_scale gives the
  // norm of the unscaled gradient).
  double global_grad_norm(float grad_scale = 1.0f) {
    return std::sqrt(params_.backend().sum_squares(params_.grad(), params_.size())) *
           double(grad_scale);
  }
  // Whether any gradient is NaN or infinite.
  bool grads_finite() { return !params_.backend().has_nonfinite(params_.grad(), params_.size()); }

  // Makes the next step() scale the gradients by min(1, max_norm / (norm + 1e-6)),
  // norm being the unscaled global norm (global_grad_norm(1 / loss_scale)).
  void clip(double max_norm, double norm) { clip_ = std::min(1.0, max_norm / (norm + 1e-6)); }

  void step(float lr, float grad_scale) {
    ++step_;
    const float scale = float(double(grad_scale) * clip_);
    Backend<Act, Acc>& be = params_.backend();
    Act* compute = ParameterStore<Act, Acc>::kComputeAliasesMaster ? nullptr : params_.compute();
    for (const Run& run : runs_) {
      be.adamw_step(params_.master() + run.offset, compute ? compute + run.offset : nullptr,
                    params_.grad() + run.offset, params_.adam_m() + run.offset,
                    params_.adam_v() + run.offset, run.count, lr, config_.beta1, config_.beta2,
                    config_.eps, run.decay ? config_.weight_decay : 0.0f, step_, scale);
    }
    clip_ = 1.0;
  }

  void zero_grad() { params_.zero_grad(); }

  int step_count() const { return step_; }
  void set_step_count(int step) { step_ = step; }
  const AdamWConfig& config() const { return config_; }

  NamedTensors export_state() {
    NamedTensors state = params_.export_buffer(params_.adam_m(), "adam_m.");
    state.merge(params_.export_buffer(params_.adam_v(), "adam_v."));
    return state;
  }
  void import_state(const NamedTensors& state, const std::string& source) {
    params_.import_buffer(params_.adam_m(), state, "adam_m.", source);
    params_.import_buffer(params_.adam_v(), state, "adam_v.", source);
  }

 private:
  struct Run {
    size_t offset, count;
    bool decay;
  };
  ParameterStore<Act, Acc>& params_;
  AdamWConfig config_;
  std::vector<Run> runs_;
  int step_ = 0;
  double clip_ = 1.0;
};

extern template class Optimizer<float, float>;
extern template class Optimizer<double, double>;

}  // namespace mpiasr
