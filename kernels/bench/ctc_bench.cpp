// CTC loss + gradient speed on the CPU (float), utterances per second, at the
// shapes of a small run: B = 16, T = 100 frames after subsampling, targets of
// ~40 tokens (36..44), vocabularies of 32 (characters) and 256 (word pieces).
// Run: ./ctc_bench  (threads: OMP_NUM_THREADS)
#include <benchmark/benchmark.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/cpu/ctc_loss.h"

namespace {

void BM_CtcLossGrad(benchmark::State& state) {
  const int B = 16, T = 100, V = static_cast<int>(state.range(0));
  std::mt19937 rng(0);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logprobs(static_cast<size_t>(B) * T * V), dlogits(logprobs.size());
  for (int row = 0; row < B * T; ++row) {  // log-softmax of random logits
    float* lp = &logprobs[static_cast<size_t>(row) * V];
    double sum = 0;
    for (int k = 0; k < V; ++k) sum += std::exp(lp[k] = normal(rng));
    for (int k = 0; k < V; ++k) lp[k] -= static_cast<float>(std::log(sum));
  }
  std::uniform_int_distribution<int32_t> token(1, V - 1), length(36, 44);
  std::vector<int32_t> targets, target_lengths(B), input_lengths(B, T);
  for (int b = 0; b < B; ++b) {
    target_lengths[b] = length(rng);
    for (int i = 0; i < target_lengths[b]; ++i) targets.push_back(token(rng));
  }
  std::vector<double> losses(B), grad_scale(B, 1.0);
  for (auto _ : state) {
    mpiasr::cpu_ctc_loss<float>(losses.data(), dlogits.data(), logprobs.data(), targets.data(),
                                target_lengths.data(), input_lengths.data(), grad_scale.data(), B,
                                T, V);
    benchmark::DoNotOptimize(dlogits.data());
  }
  state.SetItemsProcessed(state.iterations() * B);
  state.counters["utt/s"] =
      benchmark::Counter(static_cast<double>(state.iterations() * B), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_CtcLossGrad)->Arg(32)->Arg(256)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace

BENCHMARK_MAIN();
