// CTC loss and gradient on the CPU: log-space alpha-beta in double per
// utterance, utterances in parallel. The math is in kernels/ctc_math.h.
#include "kernels/cpu/ctc_loss.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ctc_check.h"
#include "kernels/ctc_math.h"
#include "src/base/error.h"

namespace mpiasr {
namespace {

// One utterance: returns -log p(y|x); writes grad [T_pad, V] when non-null.
template <typename Real>
double ctc_utterance(Real* grad, const Real* lp, const int32_t* y, int L, int frames, int T_pad,
                     int V, double scale) {
  const double inf = -log_zero<double>();
  if (grad) std::fill(grad, grad + static_cast<size_t>(T_pad) * V, Real(0));
  if (ctc_min_frames(y, L) > frames) return inf;
  if (frames == 0) return 0.0;  // empty input, empty target: p = 1
  const int S = 2 * L + 1;
  auto lp_at = [&](int t, int k) {
    return static_cast<double>(lp[static_cast<size_t>(t) * V + k]);
  };

  std::vector<double> alpha(static_cast<size_t>(frames) * S, log_zero<double>());
  alpha[0] = lp_at(0, 0);
  if (L > 0) alpha[1] = lp_at(0, y[0]);
  for (int t = 1; t < frames; ++t) {
    const double* prev = &alpha[static_cast<size_t>(t - 1) * S];
    double* row = &alpha[static_cast<size_t>(t) * S];
    for (int s = ctc_window_begin(S, frames, t); s < ctc_window_end(S, t); ++s)
      row[s] = ctc_alpha(prev, y, s, lp_at(t, ctc_state_label(y, s)));
  }
  const double* last = &alpha[static_cast<size_t>(frames - 1) * S];
  const double log_p = L > 0 ? log_add(last[S - 1], last[S - 2]) : last[S - 1];
  if (log_p == log_zero<double>()) return inf;  // e.g. -inf log-probs on every path
  if (!grad) return -log_p;

  std::vector<double> beta(static_cast<size_t>(frames) * S, log_zero<double>());
  double* tail = &beta[static_cast<size_t>(frames - 1) * S];
  tail[S - 1] = lp_at(frames - 1, 0);
  if (L > 0) tail[S - 2] = lp_at(frames - 1, y[L - 1]);
  for (int t = frames - 2; t >= 0; --t) {
    const double* next = &beta[static_cast<size_t>(t + 1) * S];
    double* row = &beta[static_cast<size_t>(t) * S];
    for (int s = ctc_window_begin(S, frames, t); s < ctc_window_end(S, t); ++s)
      row[s] = ctc_beta(next, y, s, S, lp_at(t, ctc_state_label(y, s)));
  }

  std::vector<double> row(V);  // softmax - occupancy of one frame
  for (int t = 0; t < frames; ++t) {
    for (int k = 0; k < V; ++k) row[k] = std::exp(lp_at(t, k));
    const double* a = &alpha[static_cast<size_t>(t) * S];
    const double* b = &beta[static_cast<size_t>(t) * S];
    for (int s = ctc_window_begin(S, frames, t); s < ctc_window_end(S, t); ++s) {
      const int32_t k = ctc_state_label(y, s);
      row[k] -= ctc_occupancy(a[s], b[s], lp_at(t, k), log_p);
    }
    Real* g = grad + static_cast<size_t>(t) * V;
    for (int k = 0; k < V; ++k) g[k] = static_cast<Real>(scale * row[k]);
  }
  return -log_p;
}

}  // namespace

template <typename Real>
void cpu_ctc_loss(double* losses, Real* dlogits, const Real* logprobs, const int32_t* targets,
                  const int32_t* target_lengths, const int32_t* input_lengths,
                  const double* grad_scale, int B, int T, int V) {
  // Before the parallel part, which cannot throw.
  check_ctc_arguments(targets, target_lengths, input_lengths, B, T, V);
  MPIASR_CHECK(!dlogits || grad_scale, "ctc_loss: dlogits requested without grad_scale");
  std::vector<int64_t> offsets(B + 1, 0);
  for (int b = 0; b < B; ++b) offsets[b + 1] = offsets[b] + target_lengths[b];
  const size_t stride = static_cast<size_t>(T) * V;
#pragma omp parallel for schedule(dynamic, 1) if (B > 1)
  for (int b = 0; b < B; ++b) {
    Real* grad = dlogits ? dlogits + b * stride : nullptr;
    losses[b] = ctc_utterance(grad, logprobs + b * stride, targets + offsets[b], target_lengths[b],
                              input_lengths[b], T, V, grad_scale ? grad_scale[b] : 1.0);
  }
}

template void cpu_ctc_loss<float>(double*, float*, const float*, const int32_t*, const int32_t*,
                                  const int32_t*, const double*, int, int, int);
template void cpu_ctc_loss<double>(double*, double*, const double*, const int32_t*, const int32_t*,
                                   const int32_t*, const double*, int, int, int);

CtcForwardLoss::CtcForwardLoss(std::vector<int32_t> target, int frames)
    : target_(std::move(target)),
      frames_(frames),
      alpha_(2 * target_.size() + 1, log_zero<double>()),
      next_(alpha_.size(), log_zero<double>()) {}

void CtcForwardLoss::push(const float* logprobs, int count, int V) {
  MPIASR_CHECK(
      count >= 0 && pushed_ + count <= frames_,
      "CTC forward loss: " << count << " frames pushed after " << pushed_ << " of " << frames_);
  const int L = int(target_.size()), S = 2 * L + 1;
  const int32_t* y = target_.data();
  for (int i = 0; i < count; ++i) {
    const float* lp = logprobs + size_t(i) * size_t(V);
    const int t = pushed_ + i;
    if (t == 0) {
      alpha_[0] = lp[0];
      if (L > 0) alpha_[1] = lp[y[0]];
      continue;
    }
    std::fill(next_.begin(), next_.end(), log_zero<double>());
    for (int s = ctc_window_begin(S, frames_, t); s < ctc_window_end(S, t); ++s)
      next_[s] = ctc_alpha(alpha_.data(), y, s, double(lp[ctc_state_label(y, s)]));
    alpha_.swap(next_);
  }
  pushed_ += count;
}

double CtcForwardLoss::loss() const {
  MPIASR_CHECK(pushed_ == frames_,
               "CTC forward loss: " << pushed_ << " of " << frames_ << " frames pushed");
  const int L = int(target_.size()), S = 2 * L + 1;
  const double inf = -log_zero<double>();
  if (ctc_min_frames(target_.data(), L) > frames_) return inf;
  if (frames_ == 0) return 0.0;
  const double log_p = L > 0 ? log_add(alpha_[S - 1], alpha_[S - 2]) : alpha_[S - 1];
  return log_p == log_zero<double>() ? inf : -log_p;
}

}  // namespace mpiasr
