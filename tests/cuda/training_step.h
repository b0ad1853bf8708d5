// A model on the CUDA backend trained step by step as the trainer queues a
// step: zero_grad, the step's inputs, forward + backward with the device loss
// scale, the gradient's sum of squares, the decision and AdamW (clip 1), with
// the loss scaler on in fp16 only (from 1024), as the trainer has it. For
// the tests that count or compare what a step queues.
#pragma once

#include <cuda_fp16.h>

#include <cstdint>
#include <functional>
#include <type_traits>

#include "kernels/cuda/cuda_backend.h"
#include "model/batch_view.h"
#include "model/conformer.h"
#include "model/loss_scaler.h"
#include "model/optimizer.h"

namespace mpiasr::cuda_test {

inline LossScalerConfig trainer_scaler_config(bool fp16) {
  LossScalerConfig config;
  config.enabled = fp16;
  config.init_scale = 1024.0f;
  return config;
}

inline AdamWConfig clipped_adamw() {
  AdamWConfig adamw;
  adamw.clip_norm = 1.0;
  return adamw;
}

template <typename Act>
struct TrainingStep {
  // Planned for batches of up to 3 x 83 frames.
  TrainingStep(CudaBackend<Act>& gpu, const ConformerConfig& config)
      : model(gpu, config, 3, 83, 5),
        optimizer(model.params(), clipped_adamw()),
        scaler(trainer_scaler_config(std::is_same_v<Act, __half>)) {
    optimizer.set_state(0, scaler.loss_scaler_state());
  }

  // One step on `batch` with dropout seed `seed`; `queue` queues forward and
  // backward (given the call that does it: eagerly, or as a step graph).
  void run(
      const BatchView& batch, uint64_t seed,
      const std::function<void(const std::function<void()>&)>& queue =
          [](const std::function<void()>& forward_backward) { forward_backward(); }) {
    optimizer.zero_grad();
    optimizer.set_step_inputs(13.0, 1e-3f);
    StepControl* control = optimizer.control();
    queue([&] {
      model.forward_backward(batch, 1.0, &control->scaler.scale, false, seed, &control->loss_sum);
    });
    optimizer.add_grad_sum_squares();
    optimizer.decide(scaler.rule());
    optimizer.step();
  }

  Conformer<Act, float> model;
  Optimizer<Act, float> optimizer;
  const LossScaler scaler;
};

}  // namespace mpiasr::cuda_test
