// Audio loading speed in x real time (seconds of audio per CPU second, one
// thread, so other load on the machine does not skew it): decode + downmix + resample to 16 kHz
// with read_audio, and the decode and resample steps on their own. The input is 10 s of a
// speech-like signal (harmonics of a gliding pitch plus noise), written once
// to a temporary folder as 16 kHz WAV, 44.1 kHz FLAC, 44.1 kHz stereo OGG and
// 8 kHz WAV. read_audio_info is measured in headers per second.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <numbers>
#include <random>
#include <string>
#include <vector>

#include "io/audio.h"

namespace mpiasr {
namespace {

namespace fs = std::filesystem;

constexpr double kSeconds = 10.0;

std::vector<float> speech_like(int rate, int channels) {
  std::mt19937 rng(7);
  std::normal_distribution<float> noise(0.0f, 0.02f);
  const int64_t frames = std::llround(kSeconds * rate);
  std::vector<float> out(frames * channels);
  double phase = 0;
  for (int64_t t = 0; t < frames; ++t) {
    double pitch = 120 + 40 * std::sin(2 * std::numbers::pi * 0.5 * t / rate);
    phase += 2 * std::numbers::pi * pitch / rate;
    double value = 0;
    for (int h = 1; h <= 12; ++h) value += std::sin(h * phase) / (2.0 * h);
    for (int c = 0; c < channels; ++c) out[t * channels + c] = 0.3f * value + noise(rng);
  }
  return out;
}

// The benchmark's input files, written on first use and removed at exit.
struct Files {
  fs::path dir = fs::temp_directory_path() / ("mpiasr_audio_bench_" + std::to_string(getpid()));
  std::string wav16 = (dir / "16k.wav").string();
  std::string flac44 = (dir / "44k.flac").string();
  std::string ogg44 = (dir / "44k_stereo.ogg").string();
  std::string wav8 = (dir / "8k.wav").string();
  Files() {
    fs::create_directories(dir);
    write_audio(wav16, speech_like(16000, 1), 1, 16000);
    write_audio(flac44, speech_like(44100, 1), 1, 44100);
    write_audio(ogg44, speech_like(44100, 2), 2, 44100);
    write_audio(wav8, speech_like(8000, 1), 1, 8000);
  }
  ~Files() { fs::remove_all(dir); }
};

const Files& files() {
  static Files instance;
  return instance;
}

void set_real_time_factor(benchmark::State& state) {
  state.counters["x_realtime"] =
      benchmark::Counter(kSeconds * state.iterations(), benchmark::Counter::kIsRate);
}

void read_to_16k(benchmark::State& state, const std::string& path) {
  for (auto _ : state) benchmark::DoNotOptimize(read_audio(path).data());
  set_real_time_factor(state);
}

void BM_Wav16k(benchmark::State& state) {
  read_to_16k(state, files().wav16);
}
void BM_Flac44kTo16k(benchmark::State& state) {
  read_to_16k(state, files().flac44);
}
void BM_OggStereo44kTo16k(benchmark::State& state) {
  read_to_16k(state, files().ogg44);
}
void BM_Wav8kTo16k(benchmark::State& state) {
  read_to_16k(state, files().wav8);
}

// The two steps of BM_Flac44kTo16k on their own.
void BM_Flac44kDecodeOnly(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(read_audio(files().flac44, 0, -1, 0).data());
  set_real_time_factor(state);
}

void BM_Resample44kTo16kOnly(benchmark::State& state) {
  const std::vector<float> in = speech_like(44100, 1);
  Resampler resampler(44100, 16000);
  for (auto _ : state) benchmark::DoNotOptimize(resampler.resample(in).data());
  set_real_time_factor(state);
}

void BM_ReadAudioInfoFlac(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(read_audio_info(files().flac44).frames);
  state.counters["headers_per_s"] =
      benchmark::Counter(state.iterations(), benchmark::Counter::kIsRate);
}

BENCHMARK(BM_Wav16k)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Flac44kTo16k)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_OggStereo44kTo16k)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Wav8kTo16k)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Flac44kDecodeOnly)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Resample44kTo16kOnly)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ReadAudioInfoFlac)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace mpiasr

BENCHMARK_MAIN();
