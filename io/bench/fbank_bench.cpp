// Log-mel speed on one thread, as x real time (audio seconds per CPU second),
// in the default and Kaldi modes (and with Kaldi's dither 1), and the
// 512-point real FFT of kissfft (what io/fbank.cpp uses) against FFTW
// (fftwf_plan_dft_r2c_1d, FFTW_MEASURE). io/fbank.cpp quotes the figures.
#include <algorithm>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include <benchmark/benchmark.h>
#include <fftw3.h>
#include <kiss_fftr.h>

#include "io/fbank.h"

namespace {

using mpiasr::Fbank;
using mpiasr::FbankOptions;

constexpr int kSampleRate = 16000;
constexpr double kSeconds = 10;

std::vector<float> test_audio(size_t n) {
  std::mt19937 rng(1);
  std::normal_distribution<float> noise(0.0f, 0.05f);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i)
    x[i] = noise(rng) + 0.3f * static_cast<float>(std::sin(2 * 3.14159265 * 220 * i / kSampleRate));
  return x;
}

void log_mel(benchmark::State& state, FbankOptions options) {
  const Fbank fbank(options);
  const std::vector<float> audio = test_audio(static_cast<size_t>(kSeconds * kSampleRate));
  const int frames = fbank.num_frames(audio.size());
  std::vector<float> out(static_cast<size_t>(frames) * options.n_mels);
  for (auto _ : state) {
    fbank.compute(audio.data(), audio.size(), out.data(), 1);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  const double iterations = static_cast<double>(state.iterations());
  state.counters["x_realtime"] =
      benchmark::Counter(kSeconds * iterations, benchmark::Counter::kIsRate);
  state.counters["frames_per_s"] =
      benchmark::Counter(frames * iterations, benchmark::Counter::kIsRate);
}

FbankOptions kaldi_dithered() {
  FbankOptions options = FbankOptions::kaldi();
  options.dither = 1.0;
  return options;
}

BENCHMARK_CAPTURE(log_mel, default, FbankOptions{})->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(log_mel, kaldi, FbankOptions::kaldi())->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(log_mel, kaldi_dither1, kaldi_dithered())->Unit(benchmark::kMillisecond);

constexpr int kFftSize = 512;

struct KissFftrFree {
  void operator()(kiss_fftr_state* state) const { kiss_fftr_free(state); }
};
struct FftwPlanDestroy {
  void operator()(fftwf_plan_s* plan) const { fftwf_destroy_plan(plan); }
};
struct FftwFree {
  void operator()(void* memory) const { fftwf_free(memory); }
};

void rfft512_kissfft(benchmark::State& state) {
  std::unique_ptr<kiss_fftr_state, KissFftrFree> fft(
      kiss_fftr_alloc(kFftSize, 0, nullptr, nullptr));
  const std::vector<float> input = test_audio(kFftSize);
  std::vector<kiss_fft_cpx> output(kFftSize / 2 + 1);
  for (auto _ : state) {
    kiss_fftr(fft.get(), input.data(), output.data());
    benchmark::DoNotOptimize(output.data());
    benchmark::ClobberMemory();
  }
  state.counters["ffts_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(rfft512_kissfft);

void rfft512_fftw(benchmark::State& state) {
  std::unique_ptr<float, FftwFree> input(fftwf_alloc_real(kFftSize));
  std::unique_ptr<fftwf_complex, FftwFree> output(fftwf_alloc_complex(kFftSize / 2 + 1));
  std::unique_ptr<fftwf_plan_s, FftwPlanDestroy> plan(
      fftwf_plan_dft_r2c_1d(kFftSize, input.get(), output.get(), FFTW_MEASURE));
  const std::vector<float> audio = test_audio(kFftSize);  // after planning: MEASURE overwrites
  std::copy(audio.begin(), audio.end(), input.get());
  for (auto _ : state) {
    fftwf_execute(plan.get());
    benchmark::DoNotOptimize(output.get());
    benchmark::ClobberMemory();
  }
  state.counters["ffts_per_s"] =
      benchmark::Counter(static_cast<double>(state.iterations()), benchmark::Counter::kIsRate);
}
BENCHMARK(rfft512_fftw);

}  // namespace

BENCHMARK_MAIN();
