// AdamW (decoupled weight decay, bias-corrected), the per-element update shared
// by the CPU backend (kernels/cpu/adamw.cpp) and the CUDA kernel. For step t >= 1:
//
//   g' = g * grad_scale                       (unscale / clip factor)
//   m  = beta1 m + (1 - beta1) g'
//   v  = beta2 v + (1 - beta2) g'^2
//   w -= lr * ( (m / (1 - beta1^t)) / (sqrt(v / (1 - beta2^t)) + eps) + weight_decay * w )
//
// The weight-decay term uses w before the update (as PyTorch's AdamW does with
// w *= 1 - lr * weight_decay) and never enters m or v. The coefficients come
// from the step's decision (kernels/step_control.h: lr, grad_scale and the
// bias corrections, computed once per step); R is the master-weight type.
#pragma once

#include <cmath>

#include "kernels/hd.h"

namespace mpiasr {

template <typename R>
struct AdamWCoefficients {
  R lr, beta1, beta2, eps, weight_decay, grad_scale;
  R bias_correction1;  // 1 - beta1^t
  R bias_correction2;  // 1 - beta2^t
};

// Updates one weight w and its moments m, v from its gradient g.
template <typename R>
MPIASR_HD void adamw_update(R& w, R& m, R& v, R g, const AdamWCoefficients<R>& c) {
  const R gs = g * c.grad_scale;
  m = c.beta1 * m + (R(1) - c.beta1) * gs;
  v = c.beta2 * v + (R(1) - c.beta2) * gs * gs;
  const R m_hat = m / c.bias_correction1;
  const R v_hat = v / c.bias_correction2;
  w -= c.lr * (m_hat / (std::sqrt(v_hat) + c.eps) + c.weight_decay * w);
}

}  // namespace mpiasr
