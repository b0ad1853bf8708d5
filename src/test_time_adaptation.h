// Test-time adaptation (SUTA: Lin et al. 2022, "Listen, Adapt, Better WER:
// Source-free Single-utterance Test-time Adaptation for Automatic Speech
// Recognition"): before an utterance is decoded, the model's LayerNorm gains
// and biases take `steps` Adam steps down the entropy of the model's own
// outputs on that utterance (model/output_entropy.h), the utterance is
// decoded with the adapted weights, and the checkpoint's weights are put
// back. It reads no transcript, and every utterance starts from the
// checkpoint's weights and sees only its own audio, so its result depends
// on no other utterance, batch, rank or order.
//
//   theta  the LayerNorm parameters (ParameterKind kNormWeight and kNormBias:
//          every block's six norms), all other weights fixed
//   for s = 1 .. steps:
//     J = output_entropy(model(x; theta), temperature)
//     theta = Adam(theta, dJ/dtheta; learning_rate, beta1 0.9, beta2 0.999,
//                  eps 1e-8, no weight decay), bias-corrected
//   decode model(x; theta)
//
// Cost per utterance: steps + 1 forwards and steps backwards of one utterance.
#pragma once

#include <cmath>
#include <cstdint>
#include <utility>
#include <vector>

#include "kernels/adamw_math.h"
#include "model/conformer.h"
#include "model/output_entropy.h"
#include "src/base/error.h"

namespace mpiasr {

struct AdaptationOptions {
  int steps = 0;  // 0: no adaptation
  double learning_rate = 1e-3;
  double temperature = 1.0;
};

template <typename Act, typename Acc>
class TestTimeAdaptation {
 public:
  TestTimeAdaptation(Conformer<Act, Acc>& model, const AdaptationOptions& options)
      : model_(model), options_(options) {
    MPIASR_CHECK(options.steps >= 1 && options.learning_rate > 0 && options.temperature > 0,
                 "adaptation of " << options.steps << " steps at learning rate "
                                  << options.learning_rate << ", temperature "
                                  << options.temperature);
    for (const ParameterInfo& info : model.params().infos()) {
      if (info.kind == ParameterKind::kNormWeight || info.kind == ParameterKind::kNormBias) {
        tensors_.emplace_back(info.offset, info.count);
        adapted_count_ += info.count;
      }
    }
    MPIASR_CHECK(adapted_count_ > 0, "the model has no normalization parameters to adapt");
  }

  // Parameters adapted per utterance.
  size_t adapted_parameters() const { return adapted_count_; }

  // infer's output for `batch` (one utterance) from the weights adapted to
  // it; the model's weights are the checkpoint's again on return (its
  // gradients zero). Host: float or double, as for Conformer::infer.
  template <typename Host>
  void infer(const BatchView& batch, std::vector<Host>& logprobs,
             std::vector<int32_t>& out_lengths) {
    MPIASR_CHECK(batch.batch_size == 1,
                 "test-time adaptation takes one utterance at a time, not " << batch.batch_size);
    ParameterStore<Act, Acc>& params = model_.params();
    const std::vector<Acc> checkpoint = read(params.master());
    std::vector<Acc> theta = checkpoint, first(adapted_count_, Acc(0)),
                     second(adapted_count_, Acc(0));
    std::vector<double> dlogits;
    AdamWCoefficients<Acc> adam{Acc(options_.learning_rate),
                                Acc(0.9),
                                Acc(0.999),
                                Acc(1e-8),
                                Acc(0),
                                Acc(1),
                                Acc(1),
                                Acc(1)};
    for (int step = 1; step <= options_.steps; ++step) {
      model_.infer(batch, logprobs, out_lengths);
      dlogits.assign(logprobs.size(), 0.0);
      output_entropy(logprobs.data(), out_lengths[0], model_.config().vocab_size,
                     options_.temperature, dlogits.data());
      params.zero_grad();
      model_.backward_from_logits(dlogits.data());
      const std::vector<Acc> grad = read(params.grad());
      adam.bias_correction1 = Acc(1 - std::pow(0.9, step));
      adam.bias_correction2 = Acc(1 - std::pow(0.999, step));
      for (size_t i = 0; i < adapted_count_; ++i) {
        adamw_update(theta[i], first[i], second[i], grad[i], adam);
      }
      write(theta);
    }
    model_.infer(batch, logprobs, out_lengths);
    write(checkpoint);
    params.zero_grad();
  }

 private:
  // The adapted tensors of a flat parameter buffer, one after another.
  std::vector<Acc> read(const Acc* buffer) {
    std::vector<Acc> values(adapted_count_);
    size_t at = 0;
    for (const auto& [offset, count] : tensors_) {
      model_.params().backend().to_host(values.data() + at, buffer + offset, count * sizeof(Acc));
      at += count;
    }
    return values;
  }
  void write(const std::vector<Acc>& values) {
    ParameterStore<Act, Acc>& params = model_.params();
    size_t at = 0;
    for (const auto& [offset, count] : tensors_) {
      params.backend().to_device(params.master() + offset, values.data() + at, count * sizeof(Acc));
      at += count;
    }
    params.refresh_compute();
  }

  Conformer<Act, Acc>& model_;
  AdaptationOptions options_;
  std::vector<std::pair<size_t, size_t>> tensors_;  // offset and count of each adapted tensor
  size_t adapted_count_ = 0;
};

}  // namespace mpiasr
