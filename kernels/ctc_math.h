// CTC in log space: the per-element math of the alpha-beta recursions, shared by
// the CPU backend (kernels/cpu/ctc_loss.cpp) and the CUDA kernels.
//
// A target y of length L becomes the extended sequence of S = 2L + 1 states
//   l' = (blank, y_0, blank, y_1, ..., y_{L-1}, blank),  blank = 0,
// so l'_s = 0 for even s and y_{(s-1)/2} for odd s. lp_t(k) are log-softmax
// outputs of frame t. All variables are natural logs; "log zero" is -inf.
//
//   forward   alpha_0(0) = lp_0(0), alpha_0(1) = lp_0(y_0), other states log zero
//             alpha_t(s) = lp_t(l'_s) + logsumexp(alpha_{t-1}(s), alpha_{t-1}(s-1),
//                                                 alpha_{t-1}(s-2) if skip(s))
//   backward  beta_{T-1}(S-1) = lp_{T-1}(0), beta_{T-1}(S-2) = lp_{T-1}(y_{L-1})
//             beta_t(s) = lp_t(l'_s) + logsumexp(beta_{t+1}(s), beta_{t+1}(s+1),
//                                                beta_{t+1}(s+2) if skip(s+2))
//   skip(s)   state s may be entered from s-2: l'_s is a label that differs from
//             the label before it (s odd, s >= 3, y_{(s-1)/2} != y_{(s-3)/2})
//   log p(y|x) = logsumexp(alpha_{T-1}(S-1), alpha_{T-1}(S-2))
//   occupancy  log gamma_t(s) = alpha_t(s) + beta_t(s) - lp_t(l'_s) - log p(y|x)
//   gradient   d(-log p)/d logit_t(k) = softmax_t(k) - sum_{s : l'_s = k} gamma_t(s)
//              (through the log-softmax, since sum_k gamma_t(k) = 1)
// A path needs at least L + (number of i with y_i == y_{i-1}) frames: a repeated
// label needs a blank between its two copies. Shorter inputs are infeasible.
#pragma once

#include <cmath>
#include <cstdint>

#include "kernels/hd.h"

namespace mpiasr {

template <typename R>
MPIASR_HD R log_zero() {
  return R(-INFINITY);
}

// log(exp(a) + exp(b)) without overflow; exact when either side is log zero.
template <typename R>
MPIASR_HD R log_add(R a, R b) {
  if (a == log_zero<R>()) return b;
  if (b == log_zero<R>()) return a;
  R hi = a > b ? a : b;
  R lo = a > b ? b : a;
  return hi + std::log1p(std::exp(lo - hi));
}

// log_add with the correction log1p(exp(lo - hi)), in [0, log 2], taken in
// float: within a few float ulps of log 2 (about 1e-7) of log_add, for the
// CUDA kernel, where a double exp and log1p cost ten times the float ones
// (kernels/cuda/ctc_loss.cu).
MPIASR_HD double log_add_float_correction(double a, double b) {
  if (a == log_zero<double>()) return b;
  if (b == log_zero<double>()) return a;
  const double hi = a > b ? a : b;
  const double lo = a > b ? b : a;
  return hi + double(log1pf(expf(float(lo - hi))));
}

// The log-space addition the recursions below use: log_add, or
// log_add_float_correction on the CUDA kernel.
template <typename R>
struct LogAdd {
  MPIASR_HD R operator()(R a, R b) const { return log_add(a, b); }
};
struct LogAddFloatCorrection {
  MPIASR_HD double operator()(double a, double b) const { return log_add_float_correction(a, b); }
};

// The label of extended state s: blank (0) for even s, y_{(s-1)/2} for odd s.
MPIASR_HD int32_t ctc_state_label(const int32_t* target, int s) {
  return (s & 1) ? target[s >> 1] : 0;
}

// Whether state s may be entered from state s-2 (skipping a blank).
MPIASR_HD bool ctc_can_skip(const int32_t* target, int s) {
  return (s & 1) && s >= 3 && target[s >> 1] != target[(s >> 1) - 1];
}

// The fewest frames a path for target [L] needs: L plus one per repeated label.
MPIASR_HD int ctc_min_frames(const int32_t* target, int L) {
  int frames = L;
  for (int i = 1; i < L; ++i) frames += target[i] == target[i - 1];
  return frames;
}

// The states through which a complete path can pass at frame t of `frames`:
// [ctc_window_begin, ctc_window_end). A path reaches at most state 2t+1 by
// frame t, and from state s it must still reach S-2 or S-1 in the frames left,
// two states per frame at most. Outside it alpha_t(s) + beta_t(s) is log zero,
// so the recursions may leave those states at log zero without computing them.
MPIASR_HD int ctc_window_begin(int S, int frames, int t) {
  const int begin = S - 2 * (frames - t);
  return begin > 0 ? begin : 0;
}
MPIASR_HD int ctc_window_end(int S, int t) {
  const int end = 2 * t + 2;
  return end < S ? end : S;
}

// alpha_t(s) from the previous frame's row alpha_prev [S]; lp = lp_t(l'_s).
template <typename R, typename Add = LogAdd<R>>
MPIASR_HD R ctc_alpha(const R* alpha_prev, const int32_t* target, int s, R lp, Add add = {}) {
  R sum = alpha_prev[s];
  if (s >= 1) sum = add(sum, alpha_prev[s - 1]);
  if (ctc_can_skip(target, s)) sum = add(sum, alpha_prev[s - 2]);
  return sum + lp;
}

// beta_t(s) from the next frame's row beta_next [S]; lp = lp_t(l'_s).
template <typename R, typename Add = LogAdd<R>>
MPIASR_HD R ctc_beta(const R* beta_next, const int32_t* target, int s, int S, R lp, Add add = {}) {
  R sum = beta_next[s];
  if (s + 1 < S) sum = add(sum, beta_next[s + 1]);
  if (s + 2 < S && ctc_can_skip(target, s + 2)) sum = add(sum, beta_next[s + 2]);
  return sum + lp;
}

// gamma_t(s): the probability that frame t is in state s given x and y. The
// gradient of frame t is softmax_t(k) minus the sum of gamma_t(s) over the
// states s with l'_s = k.
template <typename R>
MPIASR_HD R ctc_occupancy(R alpha, R beta, R lp, R log_likelihood) {
  return std::exp(alpha + beta - lp - log_likelihood);
}

}  // namespace mpiasr
