// Log-softmax over the last dimension on the CPU, in the accumulation type:
//   logprobs[n, v] = x[n, v] - max_v' x[n, v'] - log sum_v' exp(x[n, v'] - max)
// logits, logprobs [N, V]. Its backward is part of the CTC loss (ctc_loss.h).
#pragma once

namespace mpiasr {

template <typename T>
void cpu_log_softmax_forward(T* logprobs, const T* logits, int N, int V);

}  // namespace mpiasr
