// Loader throughput: utterances per second and seconds of audio per second
// (x real time) for the whole per-utterance pipeline (WAV decode, 80-bin
// log-mel, per-utterance CMVN, SpecAugment, padding), with 0 (the caller's
// thread), 1 and 2 worker threads. 64 generated 4-second 16 kHz utterances,
// batches of 8, one epoch per iteration; the files stay in the page cache.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "io/audio.h"
#include "io/char_tokenizer.h"
#include "io/loader.h"
#include "io/sampler.h"

namespace mpiasr {
namespace {

namespace fs = std::filesystem;

constexpr int kUtterances = 64;
constexpr int kSampleRate = 16000;
constexpr double kSeconds = 4.0;

// Generated once, removed at exit.
struct Corpus {
  fs::path dir = fs::temp_directory_path() / ("mpiasr_loader_bench_" + std::to_string(getpid()));
  Manifest manifest;

  Corpus() {
    fs::create_directories(dir);
    manifest.path = (dir / "bench.tsv").string();
    const int n = static_cast<int>(kSeconds * kSampleRate);
    std::vector<float> samples(n);
    uint32_t noise = 7;
    for (int i = 0; i < kUtterances; ++i) {
      for (int t = 0; t < n; ++t) {
        noise = noise * 1664525u + 1013904223u;
        samples[t] = 0.2f * std::sin(0.01f * (i + 5) * t) +
                     0.05f * (static_cast<float>(noise >> 8) / 16777216.0f - 0.5f);
      }
      const std::string id = std::string("u").append(std::to_string(i));
      std::string path = (dir / (id + ".wav")).string();
      write_audio(path, samples, 1, kSampleRate);
      manifest.utterances.push_back(
          {id, path, "the quick brown fox jumps over the lazy dog", 0, kSeconds, i + 1});
    }
  }
  ~Corpus() { fs::remove_all(dir); }
};

void BM_Loader(benchmark::State& state) {
  static Corpus corpus;
  auto tokenizer = CharTokenizer::from_transcripts({corpus.manifest.utterances[0].transcript});
  Fbank fbank{FbankOptions{}};
  LoaderOptions options;
  options.workers = static_cast<int>(state.range(0));
  options.queue_depth = 4;
  options.spec_augment = true;
  options.per_utterance_cmvn = true;
  Loader loader(corpus.manifest, *tokenizer, fbank, nullptr, options);
  SamplerOptions sampler_options;
  sampler_options.mode = "fixed";
  sampler_options.batch_size = 8;
  Sampler sampler(std::vector<double>(kUtterances, kSeconds), sampler_options, 0, 1);

  Batch batch;
  int epoch = 0;
  int64_t utterances = 0;
  double audio_seconds = 0;
  for (auto _ : state) {
    loader.start_epoch(epoch, sampler.epoch_batches(epoch));
    while (loader.next(batch)) {
      benchmark::DoNotOptimize(batch.features.data());
      utterances += batch.batch_size;
      audio_seconds += batch.audio_seconds;
    }
    ++epoch;
  }
  state.counters["utt/s"] =
      benchmark::Counter(static_cast<double>(utterances), benchmark::Counter::kIsRate);
  state.counters["xRT"] = benchmark::Counter(audio_seconds, benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Loader)->ArgName("workers")->Arg(0)->Arg(1)->Arg(2)->UseRealTime()->Unit(
    benchmark::kMillisecond);

}  // namespace
}  // namespace mpiasr

BENCHMARK_MAIN();
