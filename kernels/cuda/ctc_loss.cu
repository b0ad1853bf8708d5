// The output head's loss: CTC in double log space over the fp32 log-probs of
// kernels/cuda/log_softmax.cu.
//
// CTC (blank = 0), the math of kernels/ctc_math.h (the CPU backend's), one
// thread block per utterance (as warp-ctc does), S = 2L + 1 states:
//   1. zero the utterance's gradient rows [T, V]; stop at +inf loss and zero
//      gradient when the target needs more frames than there are, and at loss
//      0 for an empty input with an empty target
//   2. alpha [frames, S] in the double scratch, a frame per barrier step,
//      states outside the window of complete paths at log zero
//   3. log p = logsumexp of the last two states; -log p is the loss
//   4. beta, from the last frame down, in two rows after the alpha table; once
//      beta_t is known the gradient of frame t is written:
//        g[t, k] = scale (exp(lp_t(k)) - sum_{s : l'_s = k} gamma_t(s))
//      with the occupancies gamma_t(s) in shared memory, summed for the blank
//      over the even states (block reduction) and for each distinct label over
//      the chain of its repeats in the target (next[i]: the next j > i with
//      y_j = y_i); all k first get scale exp(lp_t(k)), then after a barrier the
//      blank and the target's labels are overwritten with the difference.
//      scale = grad_scale[b] * loss_scale (the dynamic loss scale, read on
//      the device).
// Shared memory: targets, next and first-occurrence flags (int [L] each),
// gamma [S] and label sums [L] (double). A second, one-thread kernel adds the
// kept utterances' losses to the step's loss sum, in utterance order.
#include <algorithm>
#include <cmath>

#include "kernels/ctc_math.h"
#include "kernels/cuda/ctc_loss.h"
#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_utils.cuh"
#include "kernels/cuda/launch.h"
#include "src/base/error.h"

namespace mpiasr {

namespace cuda_kernels {
namespace {

constexpr int kCtcThreads = 256;
// Dynamic shared memory a block may use without opting in to more: 48 KiB in
// all, less the static reduction buffer.
constexpr size_t kCtcSharedLimit = 48 * 1024 - kWarp * sizeof(double);

size_t ctc_shared_bytes(int L) {
  const size_t S = size_t(2 * L + 1);
  return 3 * sizeof(int) * size_t(L) + sizeof(double) * (S + size_t(L));
}

template <typename G>
__global__ void ctc_kernel(double* losses, G* dlogits, const float* logprobs, CtcDeviceArgs args,
                           int T_pad, int V) {
  MPIASR_DYNAMIC_SHARED(double, shared_doubles);
  MPIASR_SHARED(double[kWarp], reduce);
  const int b = blockIdx.x, tid = threadIdx.x, threads = blockDim.x;
  const int L = args.target_lengths[b], frames = args.input_lengths[b], S = 2 * L + 1;
  const double scale = args.grad_scale
                           ? args.grad_scale[b] * (args.loss_scale ? double(*args.loss_scale) : 1.0)
                           : 0.0;
  const float* lp = logprobs + size_t(b) * T_pad * V;
  G* grad = dlogits ? dlogits + size_t(b) * T_pad * V : nullptr;

  double* gamma = shared_doubles;                          // [S]
  double* label_sum = gamma + S;                           // [L]
  int32_t* y = reinterpret_cast<int32_t*>(label_sum + L);  // [L]
  int32_t* next = y + L;                                   // [L]
  int32_t* first = next + L;                               // [L]

  // 1. zeroed gradient, targets in shared memory, trivial outcomes.
  if (grad) {
    for (size_t e = tid; e < size_t(T_pad) * V; e += threads) grad[e] = from_float<G>(0.0f);
  }
  const int32_t* target = args.targets + args.target_offsets[b];
  for (int i = tid; i < L; i += threads) y[i] = target[i];
  __syncthreads();
  for (int i = tid; i < L; i += threads) {
    int n = -1;
    for (int j = i + 1; j < L && n < 0; ++j) n = y[j] == y[i] ? j : -1;
    bool is_first = true;
    for (int j = 0; j < i && is_first; ++j) is_first = y[j] != y[i];
    next[i] = n;
    first[i] = is_first ? 1 : 0;
  }
  if (ctc_min_frames(y, L) > frames) {
    if (tid == 0) losses[b] = INFINITY;
    return;
  }
  if (frames == 0) {
    if (tid == 0) losses[b] = 0.0;
    return;
  }
  auto lp_at = [&](int t, int k) { return double(lp[size_t(t) * V + k]); };

  // 2. alpha.
  double* alpha = args.scratch + args.scratch_offsets[b];  // [frames, S]
  for (int s = tid; s < S; s += threads) {
    double value = log_zero<double>();
    if (s == 0) value = lp_at(0, 0);
    if (s == 1) value = lp_at(0, y[0]);
    alpha[s] = value;
  }
  __syncthreads();
  for (int t = 1; t < frames; ++t) {
    const double* prev = alpha + size_t(t - 1) * S;
    double* row = alpha + size_t(t) * S;
    const int begin = ctc_window_begin(S, frames, t), end = ctc_window_end(S, t);
    for (int s = tid; s < S; s += threads) {
      row[s] = s >= begin && s < end ? ctc_alpha(prev, y, s, lp_at(t, ctc_state_label(y, s)))
                                     : log_zero<double>();
    }
    __syncthreads();
  }

  // 3. likelihood.
  const double* last = alpha + size_t(frames - 1) * S;
  const double log_p = L > 0 ? log_add(last[S - 1], last[S - 2]) : last[S - 1];
  if (tid == 0) losses[b] = log_p == log_zero<double>() ? double(INFINITY) : -log_p;
  if (!grad || log_p == log_zero<double>()) return;

  // 4. beta and the gradient, frame by frame from the end.
  double* beta_rows = alpha + size_t(frames) * S;  // [2, S]
  for (int t = frames - 1; t >= 0; --t) {
    double* row = beta_rows + size_t(t % 2) * S;
    const double* next_row = beta_rows + size_t((t + 1) % 2) * S;
    const int begin = ctc_window_begin(S, frames, t), end = ctc_window_end(S, t);
    for (int s = tid; s < S; s += threads) {
      double value = log_zero<double>();
      if (t == frames - 1) {
        if (s == S - 1) value = lp_at(t, 0);
        if (L > 0 && s == S - 2) value = lp_at(t, y[L - 1]);
      } else if (s >= begin && s < end) {
        value = ctc_beta(next_row, y, s, S, lp_at(t, ctc_state_label(y, s)));
      }
      row[s] = value;
    }
    __syncthreads();

    const double* a = alpha + size_t(t) * S;
    double blank = 0.0;
    for (int s = tid; s < S; s += threads) {
      const double g = s >= begin && s < end
                           ? ctc_occupancy(a[s], row[s], lp_at(t, ctc_state_label(y, s)), log_p)
                           : 0.0;
      gamma[s] = g;
      if (s % 2 == 0) blank += g;
    }
    blank = block_sum(blank, reduce);  // its barriers also publish gamma
    for (int i = tid; i < L; i += threads) {
      if (!first[i]) continue;
      double sum = 0.0;
      for (int j = i; j >= 0; j = next[j]) sum += gamma[2 * j + 1];
      label_sum[i] = sum;
    }
    G* g_row = grad + size_t(t) * V;
    for (int k = tid; k < V; k += threads)
      g_row[k] = from_float<G>(float(scale * exp(lp_at(t, k))));
    __syncthreads();
    if (tid == 0) g_row[0] = from_float<G>(float(scale * (exp(lp_at(t, 0)) - blank)));
    for (int i = tid; i < L; i += threads) {
      if (first[i])
        g_row[y[i]] = from_float<G>(float(scale * (exp(lp_at(t, y[i])) - label_sum[i])));
    }
    __syncthreads();  // the beta row written next frame is read above
  }
}

// One thread: the losses of the kept utterances added in order.
__global__ void sum_losses_kernel(double* loss_sum, const double* losses, const double* grad_scale,
                                  int B) {
  double sum = *loss_sum;
  for (int b = 0; b < B; ++b) {
    if (!grad_scale || grad_scale[b] != 0.0) sum += losses[b];
  }
  *loss_sum = sum;
}

}  // namespace
}  // namespace cuda_kernels

using namespace cuda_kernels;

CtcLayout ctc_layout(const int32_t* target_lengths, const int32_t* input_lengths, int B) {
  CtcLayout layout;
  layout.target_offsets.resize(size_t(B));
  layout.scratch_offsets.resize(size_t(B));
  size_t scratch = 0;
  for (int b = 0; b < B; ++b) {
    layout.scratch_offsets[size_t(b)] = int64_t(scratch);
    scratch += size_t(input_lengths[b] + 2) * size_t(2 * target_lengths[b] + 1);
    layout.max_target_length = std::max(layout.max_target_length, int(target_lengths[b]));
  }
  layout.scratch_doubles = scratch;
  layout.target_stride = std::max(1, (layout.max_target_length + 31) / 32 * 32);
  for (int b = 0; b < B; ++b) layout.target_offsets[size_t(b)] = int64_t(b) * layout.target_stride;
  return layout;
}

int cuda_ctc_max_target_length() {
  int L = 0;
  while (ctc_shared_bytes(L + 1) <= kCtcSharedLimit) ++L;
  return L;
}

template <typename G>
void cuda_ctc_loss(double* losses, G* dlogits, const float* logprobs, const CtcDeviceArgs& args,
                   int B, int T, int V, int max_target_length, double* loss_sum,
                   cudaStream_t stream) {
  if (B <= 0) return;
  MPIASR_CHECK(!dlogits || args.grad_scale, "ctc_loss: dlogits requested without grad_scale");
  if (max_target_length > cuda_ctc_max_target_length()) {
    MPIASR_FAIL(ExitCode::kBadInput, "ctc_loss: a target of "
                                         << max_target_length
                                         << " tokens is longer than the CUDA kernel takes ("
                                         << cuda_ctc_max_target_length()
                                         << "); split the utterance or use a larger vocabulary");
  }
  // Shared memory for the longest target rounded up to 32 tokens (each block
  // lays out its own target's arrays), so batches whose longest targets
  // differ a little launch alike and share a step graph.
  const size_t shared =
      ctc_shared_bytes(std::min(cuda_ctc_max_target_length(), (max_target_length + 31) / 32 * 32));
  MPIASR_LAUNCH(ctc_kernel<G>, unsigned(B), kCtcThreads, shared, stream, losses, dlogits, logprobs,
                args, T, V);
  if (loss_sum) {
    MPIASR_LAUNCH(sum_losses_kernel, 1, 1, 0, stream, loss_sum, losses, args.grad_scale, B);
  }
}

template void cuda_ctc_loss<__half>(double*, __half*, const float*, const CtcDeviceArgs&, int, int,
                                    int, int, double*, cudaStream_t);
template void cuda_ctc_loss<__nv_bfloat16>(double*, __nv_bfloat16*, const float*,
                                           const CtcDeviceArgs&, int, int, int, int, double*,
                                           cudaStream_t);

}  // namespace mpiasr
