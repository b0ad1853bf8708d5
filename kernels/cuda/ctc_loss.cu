// The output head's loss: CTC in log space over the fp32 log-probs of
// kernels/cuda/log_softmax.cu.
//
// CTC (blank = 0), the math of kernels/ctc_math.h (the CPU backend's), one
// thread block per utterance (as warp-ctc does), S = 2L + 1 states, a thread
// per state (and more states per thread past kCtcThreads):
//   1. zero the utterance's padding frames' gradient rows; stop at +inf loss
//      (and zero gradient) when the target needs more frames than there are,
//      and at loss 0 for an empty input with an empty target
//   2. alpha, a frame per barrier step, from the previous frame's row held
//      on chip (shared memory, double) to the next; each row also goes to
//      the double scratch [frames, S], written and not read back until the
//      gradient. States outside the window of complete paths stay at log zero
//   3. log p = logsumexp of the last two states; -log p is the loss
//   4. beta, from the last frame down, in two rows on chip; once beta_t is
//      known the gradient of frame t is written:
//        g[t, k] = scale (exp(lp_t(k)) - sum_{s : l'_s = k} gamma_t(s))
//      the blank's occupancy summed over the even states (block reduction)
//      and each distinct label's over the chain of its repeats in the target
//      (next[i]: the next j > i with y_j = y_i) from the odd states'
//      occupancies in shared memory; all k first get scale exp(lp_t(k)),
//      then after a barrier the blank and the target's labels are
//      overwritten with the difference. scale = grad_scale[b] * loss_scale
//      (the dynamic loss scale, read on the device).
// The recursions add in double with the correction log1p(exp(lo - hi)) in
// float (log_add_float_correction, about 1e-7 each), and the occupancies
// and exp(lp) are float: a double exp and log1p cost ten times the float
// ones, and the recursion is the kernel's critical path (a frame at a time,
// 2 frames' worth of exps a state). Each frame's log-probs of the states are
// gathered while the frame before is computed. The loss is within 1e-9 of
// the CPU's double (relative; 1.3e-10 at 700 frames and a target of 300
// tokens), the gradient within the activation type's rounding.
// Shared memory: targets (int [L]), next (int16 [L]) and first-occurrence
// flags (uint8 [L]), two state rows (double [2][S]), the odd states'
// occupancies and the label sums (float [L] each): 47 L + 16 bytes, so
// targets up to 1041 tokens within 48 KiB. A second, one-thread kernel adds
// the kept utterances' losses to the step's loss sum, in utterance order.
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
// States a thread holds at most: the longest target's 2L + 1 over the block.
constexpr int kCtcMaxStatesPerThread = 9;

size_t ctc_shared_bytes(int L) {
  const size_t S = size_t(2 * L + 1);
  return 2 * sizeof(double) * S +
         (sizeof(int32_t) + sizeof(int16_t) + 1 + 2 * sizeof(float)) * size_t(L);
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

  double* rows = shared_doubles;                              // [2][S]
  float* gamma_odd = reinterpret_cast<float*>(rows + 2 * S);  // [L]: gamma_t(2i + 1)
  float* label_sum = gamma_odd + L;                           // [L]
  int32_t* y = reinterpret_cast<int32_t*>(label_sum + L);     // [L]
  int16_t* next = reinterpret_cast<int16_t*>(y + L);          // [L]
  uint8_t* first = reinterpret_cast<uint8_t*>(next + L);      // [L]

  // 1. zeroed padding rows, targets in shared memory, trivial outcomes.
  // Frames [from, to) of the gradient, zeroed.
  const auto zero_rows = [&](int from, int to) {
    for (size_t e = size_t(from) * V + tid; e < size_t(to) * V; e += threads)
      grad[e] = from_float<G>(0.0f);
  };
  if (grad) zero_rows(frames, T_pad);
  const int32_t* target = args.targets + args.target_offsets[b];
  for (int i = tid; i < L; i += threads) y[i] = target[i];
  __syncthreads();
  for (int i = tid; i < L; i += threads) {
    int n = -1;
    for (int j = i + 1; j < L && n < 0; ++j) n = y[j] == y[i] ? j : -1;
    bool is_first = true;
    for (int j = 0; j < i && is_first; ++j) is_first = y[j] != y[i];
    next[i] = int16_t(n);
    first[i] = is_first ? 1 : 0;
  }
  if (ctc_min_frames(y, L) > frames) {
    if (grad) zero_rows(0, frames);
    if (tid == 0) losses[b] = INFINITY;
    return;
  }
  if (frames == 0) {
    if (tid == 0) losses[b] = 0.0;
    return;
  }
  __syncthreads();  // y, next and first are read by every thread below
  // The log-probs of this thread's states s = tid + j threads at frame t.
  float lp_states[kCtcMaxStatesPerThread];
  const auto gather = [&](int t) {
MPIASR_UNROLL
    for (int j = 0; j < kCtcMaxStatesPerThread; ++j) {
      const int s = tid + j * threads;
      if (s < S) lp_states[j] = lp[size_t(t) * V + ctc_state_label(y, s)];
    }
  };

  // 2. alpha.
  double* alpha = args.scratch + args.scratch_offsets[b];  // [frames, S]
  gather(0);
MPIASR_UNROLL
  for (int j = 0; j < kCtcMaxStatesPerThread; ++j) {
    const int s = tid + j * threads;
    if (s >= S) continue;
    const double value = s <= 1 ? double(lp_states[j]) : log_zero<double>();
    rows[s] = value;
    alpha[s] = value;
  }
  if (frames > 1) gather(1);
  __syncthreads();
  for (int t = 1; t < frames; ++t) {
    const double* prev = rows + size_t((t - 1) % 2) * S;
    double* row = rows + size_t(t % 2) * S;
    const int begin = ctc_window_begin(S, frames, t), end = ctc_window_end(S, t);
    double values[kCtcMaxStatesPerThread];
MPIASR_UNROLL
    for (int j = 0; j < kCtcMaxStatesPerThread; ++j) {
      const int s = tid + j * threads;
      values[j] = s >= begin && s < end
                      ? ctc_alpha(prev, y, s, double(lp_states[j]), LogAddFloatCorrection{})
                      : log_zero<double>();
    }
    if (t + 1 < frames) gather(t + 1);  // in flight while the row is stored
MPIASR_UNROLL
    for (int j = 0; j < kCtcMaxStatesPerThread; ++j) {
      const int s = tid + j * threads;
      if (s >= S) continue;
      row[s] = values[j];
      alpha[size_t(t) * S + s] = values[j];
    }
    __syncthreads();
  }

  // 3. likelihood.
  const double* last = rows + size_t((frames - 1) % 2) * S;
  const double log_p = L > 0 ? log_add_float_correction(last[S - 1], last[S - 2]) : last[S - 1];
  if (tid == 0) losses[b] = log_p == log_zero<double>() ? double(INFINITY) : -log_p;
  if (!grad) return;
  if (log_p == log_zero<double>()) {
    zero_rows(0, frames);
    return;
  }
  __syncthreads();  // the last alpha row is read above, and beta's rows take its place

  // 4. beta and the gradient, frame by frame from the end.
  gather(frames - 1);
  for (int t = frames - 1; t >= 0; --t) {
    double* row = rows + size_t(t % 2) * S;
    const double* next_row = rows + size_t((t + 1) % 2) * S;
    const int begin = ctc_window_begin(S, frames, t), end = ctc_window_end(S, t);
    double values[kCtcMaxStatesPerThread];
MPIASR_UNROLL
    for (int j = 0; j < kCtcMaxStatesPerThread; ++j) {
      const int s = tid + j * threads;
      double value = log_zero<double>();
      if (t == frames - 1) {
        if (s == S - 1 || (L > 0 && s == S - 2)) value = double(lp_states[j]);
      } else if (s >= begin && s < end) {
        value = ctc_beta(next_row, y, s, S, double(lp_states[j]), LogAddFloatCorrection{});
      }
      values[j] = value;
    }
    // gamma_t(s) = exp(alpha_t(s) + beta_t(s) - lp_t(l'_s) - log p).
    const double* a = alpha + size_t(t) * S;
    float blank = 0.0f;
MPIASR_UNROLL
    for (int j = 0; j < kCtcMaxStatesPerThread; ++j) {
      const int s = tid + j * threads;
      if (s >= S) continue;
      row[s] = values[j];
      const float g = s >= begin && s < end
                          ? expf(float(a[s] + values[j] - double(lp_states[j]) - log_p))
                          : 0.0f;
      if (s % 2 == 0) {
        blank += g;
      } else {
        gamma_odd[s / 2] = g;
      }
    }
    if (t > 0) gather(t - 1);
    blank = block_sum(blank, reinterpret_cast<float*>(reduce));  // its barriers publish gamma
    for (int i = tid; i < L; i += threads) {
      if (!first[i]) continue;
      float sum = 0.0f;
      for (int j = i; j >= 0; j = next[j]) sum += gamma_odd[j];
      label_sum[i] = sum;
    }
    G* g_row = grad + size_t(t) * V;
    const float row_scale = float(scale);
    for (int k = tid; k < V; k += threads)
      g_row[k] = from_float<G>(row_scale * expf(lp[size_t(t) * V + k]));
    __syncthreads();
    if (tid == 0) g_row[0] = from_float<G>(row_scale * (expf(lp[size_t(t) * V]) - blank));
    for (int i = tid; i < L; i += threads) {
      if (first[i]) {
        const int k = y[i];
        g_row[k] = from_float<G>(row_scale * (expf(lp[size_t(t) * V + k]) - label_sum[i]));
      }
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
    scratch += size_t(input_lengths[b]) * size_t(2 * target_lengths[b] + 1);
    layout.max_target_length = std::max(layout.max_target_length, int(target_lengths[b]));
  }
  layout.scratch_doubles = scratch;
  layout.target_stride = std::max(1, (layout.max_target_length + 31) / 32 * 32);
  for (int b = 0; b < B; ++b) layout.target_offsets[size_t(b)] = int64_t(b) * layout.target_stride;
  return layout;
}

int cuda_ctc_max_target_length() {
  int L = 0;
  while (ctc_shared_bytes(L + 1) <= kCtcSharedLimit &&
         2 * (L + 1) + 1 <= kCtcMaxStatesPerThread * kCtcThreads)
    ++L;
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
