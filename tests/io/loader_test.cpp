// Batch loader: the batches match features computed directly (read_audio ->
// Fbank -> CMVN -> SpecAugment with the documented seeds) and the padded
// layout of io/batch.h; 1 and 4 workers give bit-identical batches to the
// synchronous path; resuming, errors naming the utterance, the fixed pool,
// stopping mid-epoch, and the workers' priority and CPU accounting.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <sndfile.h>
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>
#include <thread>

#include "io/audio.h"
#include "io/char_tokenizer.h"
#include "io/loader.h"
#include "io/sampler.h"
#include "io/speed_perturb.h"
#include "src/base/error.h"
#include "tests/base/thread_scheduling.h"

namespace mpiasr {
namespace {

namespace fs = std::filesystem;

// A batch's contents, copied out of the loader's reusable buffers.
struct BatchCopy {
  int batch_size, max_frames, n_mels;
  std::vector<float> features;
  std::vector<int32_t> frame_lengths, targets, target_lengths;
  std::vector<size_t> utterance_indices;
  double audio_seconds;

  explicit BatchCopy(const Batch& batch)
      : batch_size(batch.batch_size),
        max_frames(batch.max_frames),
        n_mels(batch.n_mels),
        features(batch.features.data(), batch.features.data() + batch.features.size()),
        frame_lengths(batch.frame_lengths.data(), batch.frame_lengths.data() + batch_size),
        targets(batch.targets.data(), batch.targets.data() + batch.targets.size()),
        target_lengths(batch.target_lengths.data(), batch.target_lengths.data() + batch_size),
        utterance_indices(batch.utterance_indices),
        audio_seconds(batch.audio_seconds) {}

  // Bit-identical, so -0.0 != 0.0 and NaN payloads count.
  bool operator==(const BatchCopy& other) const {
    return batch_size == other.batch_size && max_frames == other.max_frames &&
           n_mels == other.n_mels && features.size() == other.features.size() &&
           std::memcmp(features.data(), other.features.data(), features.size() * sizeof(float)) ==
               0 &&
           frame_lengths == other.frame_lengths && targets == other.targets &&
           target_lengths == other.target_lengths && utterance_indices == other.utterance_indices &&
           audio_seconds == other.audio_seconds;
  }
};

void write_wav(const std::string& path, const std::vector<float>& samples, int sample_rate) {
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = 1;
  info.format = SF_FORMAT_WAV | SF_FORMAT_PCM_16;
  SNDFILE* file = sf_open(path.c_str(), SFM_WRITE, &info);
  ASSERT_NE(file, nullptr) << sf_strerror(nullptr);
  EXPECT_EQ(sf_writef_float(file, samples.data(), samples.size()),
            static_cast<sf_count_t>(samples.size()));
  sf_close(file);
}

// Ten utterances of 0.3-1.2 s: two tones and noise, each file different.
class LoaderTest : public testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("mpiasr_loader_" + std::to_string(getpid()));
    fs::create_directories(dir_);
    manifest_.path = (dir_ / "train.tsv").string();
    const char* transcripts[] = {"hello world",    "a quick test",  "speech", "loader threads",
                                 "padded batch",   "bit identical", "x",      "ten utterances",
                                 "of short audio", "the end"};
    uint32_t noise = 1;
    for (int i = 0; i < 10; ++i) {
      int n = 4800 + 1600 * ((i * 7) % 10);
      std::vector<float> samples(n);
      for (int t = 0; t < n; ++t) {
        noise = noise * 1664525u + 1013904223u;
        samples[t] = 0.3f * std::sin(0.02f * (i + 3) * t) + 0.1f * std::sin(0.31f * t) +
                     0.05f * (static_cast<float>(noise >> 8) / 16777216.0f - 0.5f);
      }
      std::string path = (dir_ / ("u" + std::to_string(i) + ".wav")).string();
      write_wav(path, samples, 16000);
      manifest_.utterances.push_back(
          {"utt" + std::to_string(i), path, transcripts[i], 0, n / 16000.0, i + 1});
    }
    std::vector<std::string> texts;
    for (const auto& utterance : manifest_.utterances) texts.push_back(utterance.transcript);
    tokenizer_ = CharTokenizer::from_transcripts(texts);
    FbankOptions fbank_options;
    fbank_options.dither = 0.01;
    fbank_ = std::make_unique<Fbank>(fbank_options);
    cmvn_.mean.assign(80, -5.0f);
    cmvn_.inv_std.assign(80, 0.25f);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<BatchCopy> run(const LoaderOptions& options, const Cmvn* cmvn, int epoch,
                             const std::vector<std::vector<size_t>>& batches, size_t start = 0) {
    Loader loader(manifest_, *tokenizer_, *fbank_, cmvn, options);
    loader.start_epoch(epoch, batches, start);
    std::vector<BatchCopy> out;
    Batch batch;
    while (loader.next(batch)) out.emplace_back(batch);
    return out;
  }

  // Utterance i's features computed directly, as loader.h documents them.
  std::vector<float> reference_features(size_t i, int epoch, const LoaderOptions& options,
                                        const Cmvn* cmvn, uint64_t dither_seed) {
    std::vector<float> samples = read_audio(manifest_.utterances[i].audio_path);
    if (!options.speed_factors.empty()) {
      samples = speed_perturb(samples, 16000,
                              speed_factor(options.speed_factors, options.seed, epoch, i));
    }
    int frames = fbank_->num_frames(samples.size());
    std::vector<float> feats(frames * 80);
    fbank_->compute(samples.data(), samples.size(), feats.data(), dither_seed);
    if (cmvn) cmvn->apply(feats.data(), frames, 80);
    if (options.per_utterance_cmvn) normalize_per_utterance(feats.data(), frames, 80);
    if (options.spec_augment) {
      spec_augment(feats.data(), frames, 80, options.spec_augment_options,
                   spec_augment_seed(options.seed, epoch, i));
    }
    return feats;
  }

  fs::path dir_;
  Manifest manifest_;
  std::unique_ptr<CharTokenizer> tokenizer_;
  std::unique_ptr<Fbank> fbank_;
  Cmvn cmvn_;
};

const std::vector<std::vector<size_t>> kBatches = {{3, 0, 7}, {1}, {9, 2}, {4, 5, 6, 8}, {0, 3}};

TEST_F(LoaderTest, BatchesHoldTheDocumentedFeaturesTokensAndPadding) {
  LoaderOptions options;
  options.workers = 0;
  options.spec_augment = true;
  options.seed = 11;
  std::vector<BatchCopy> batches = run(options, &cmvn_, 2, kBatches);
  ASSERT_EQ(batches.size(), kBatches.size());
  for (size_t k = 0; k < batches.size(); ++k) {
    const BatchCopy& batch = batches[k];
    EXPECT_EQ(batch.utterance_indices, kBatches[k]);
    EXPECT_EQ(batch.batch_size, static_cast<int>(kBatches[k].size()));
    EXPECT_EQ(batch.n_mels, 80);
    size_t target_offset = 0;
    double seconds = 0;
    int longest = 0;
    for (size_t b = 0; b < kBatches[k].size(); ++b) {
      size_t i = kBatches[k][b];
      const Utterance& utterance = manifest_.utterances[i];
      seconds += utterance.duration;
      int frames = fbank_->num_frames(std::lround(utterance.duration * 16000));
      longest = std::max(longest, frames);
      ASSERT_EQ(batch.frame_lengths[b], frames);
      // Matches a direct computation with a dither seed that is not 0 and
      // differs per utterance: try the loader's output against seed 0.
      std::vector<float> with_zero_seed = reference_features(i, 2, options, &cmvn_, 0);
      const float* row = batch.features.data() + b * batch.max_frames * 80;
      EXPECT_NE(std::memcmp(row, with_zero_seed.data(), frames * 80 * sizeof(float)), 0);
      for (int t = frames; t < batch.max_frames; ++t) {
        for (int j = 0; j < 80; ++j) ASSERT_EQ(row[t * 80 + j], 0.0f);
      }
      std::vector<int> tokens = tokenizer_->encode(utterance.transcript);
      ASSERT_EQ(batch.target_lengths[b], static_cast<int32_t>(tokens.size()));
      EXPECT_TRUE(std::equal(tokens.begin(), tokens.end(), batch.targets.begin() + target_offset));
      target_offset += tokens.size();
    }
    EXPECT_EQ(batch.max_frames, longest);
    EXPECT_EQ(batch.targets.size(), target_offset);
    EXPECT_NEAR(batch.audio_seconds, seconds, 1e-9);
  }
}

// frame_multiple pads a batch's frames past its longest utterance with zeros;
// the features, lengths and targets are those of the unpadded batch.
TEST_F(LoaderTest, FramesArePaddedToTheFrameMultiple) {
  LoaderOptions options;
  options.workers = 0;
  const std::vector<BatchCopy> plain = run(options, &cmvn_, 1, kBatches);
  options.frame_multiple = 64;
  const std::vector<BatchCopy> padded = run(options, &cmvn_, 1, kBatches);
  ASSERT_EQ(padded.size(), plain.size());
  for (size_t k = 0; k < plain.size(); ++k) {
    const BatchCopy& a = plain[k];
    const BatchCopy& b = padded[k];
    EXPECT_EQ(b.max_frames % 64, 0);
    EXPECT_GE(b.max_frames, a.max_frames);
    EXPECT_LT(b.max_frames, a.max_frames + 64);
    EXPECT_EQ(b.frame_lengths, a.frame_lengths);
    EXPECT_EQ(b.target_lengths, a.target_lengths);
    EXPECT_EQ(b.targets, a.targets);
    for (int u = 0; u < a.batch_size; ++u) {
      for (int t = 0; t < b.max_frames; ++t) {
        for (int j = 0; j < 80; ++j) {
          const float expected =
              t < a.max_frames ? a.features[(size_t(u) * a.max_frames + t) * 80 + j] : 0.0f;
          ASSERT_EQ(b.features[(size_t(u) * b.max_frames + t) * 80 + j], expected)
              << "batch " << k << ", utterance " << u << ", frame " << t;
        }
      }
    }
  }
}

TEST_F(LoaderTest, FeaturesMatchADirectComputationWithoutDither) {
  FbankOptions no_dither;
  fbank_ = std::make_unique<Fbank>(no_dither);
  LoaderOptions options;
  options.workers = 2;
  options.spec_augment = true;
  options.per_utterance_cmvn = true;
  options.seed = 5;
  std::vector<BatchCopy> batches = run(options, nullptr, 1, kBatches);
  for (size_t k = 0; k < batches.size(); ++k) {
    for (size_t b = 0; b < kBatches[k].size(); ++b) {
      std::vector<float> expected = reference_features(kBatches[k][b], 1, options, nullptr, 0);
      const float* row = batches[k].features.data() + b * batches[k].max_frames * 80;
      ASSERT_EQ(std::memcmp(row, expected.data(), expected.size() * sizeof(float)), 0)
          << "batch " << k << " utterance " << kBatches[k][b];
    }
  }
}

TEST_F(LoaderTest, SpeedPerturbationFollowsTheSeededFactorOfEachUtteranceAndEpoch) {
  FbankOptions no_dither;
  fbank_ = std::make_unique<Fbank>(no_dither);
  LoaderOptions options;
  options.workers = 2;
  options.seed = 5;
  options.speed_factors = {0.9, 1.0, 1.1};
  std::set<double> used;
  for (int epoch : {0, 1}) {
    std::vector<BatchCopy> batches = run(options, nullptr, epoch, kBatches);
    for (size_t k = 0; k < batches.size(); ++k) {
      for (size_t b = 0; b < kBatches[k].size(); ++b) {
        const size_t i = kBatches[k][b];
        const double factor = speed_factor(options.speed_factors, 5, uint64_t(epoch), i);
        used.insert(factor);
        const size_t samples = size_t(std::lround(manifest_.utterances[i].duration * 16000));
        // n samples at speed f become about n / f.
        EXPECT_NEAR(batches[k].frame_lengths[b], fbank_->num_frames(samples) / factor, 2)
            << "utterance " << i << ", factor " << factor;
        std::vector<float> expected = reference_features(i, epoch, options, nullptr, 0);
        ASSERT_EQ(expected.size(), size_t(batches[k].frame_lengths[b]) * 80);
        const float* row = batches[k].features.data() + b * batches[k].max_frames * 80;
        ASSERT_EQ(std::memcmp(row, expected.data(), expected.size() * sizeof(float)), 0)
            << "epoch " << epoch << ", utterance " << i;
      }
    }
  }
  EXPECT_EQ(used.size(), 3u);
}

TEST_F(LoaderTest, WorkersGiveBitIdenticalBatches) {
  SamplerOptions fixed;
  fixed.mode = "fixed";
  fixed.batch_size = 3;
  Sampler sampler(std::vector<double>(10, 1.0), fixed, 0, 1);
  auto batches = sampler.epoch_batches(0);
  batches.insert(batches.end(), kBatches.begin(), kBatches.end());
  LoaderOptions options;
  options.spec_augment = true;
  options.seed = 3;
  options.workers = 0;
  std::vector<BatchCopy> synchronous = run(options, &cmvn_, 4, batches);
  for (int workers : {1, 4}) {
    for (int depth : {1, 2, 5}) {
      options.workers = workers;
      options.queue_depth = depth;
      EXPECT_TRUE(run(options, &cmvn_, 4, batches) == synchronous)
          << workers << " workers, queue depth " << depth;
    }
  }
  // The epoch changes dither and masks; the seed does too.
  EXPECT_FALSE(run(options, &cmvn_, 5, batches) == synchronous);
  options.seed = 4;
  EXPECT_FALSE(run(options, &cmvn_, 4, batches) == synchronous);
}

TEST_F(LoaderTest, StartIndexResumesTheEpoch) {
  LoaderOptions options;
  options.workers = 0;
  std::vector<BatchCopy> whole = run(options, &cmvn_, 0, kBatches);
  options.workers = 3;
  std::vector<BatchCopy> resumed = run(options, &cmvn_, 0, kBatches, 2);
  ASSERT_EQ(resumed.size(), 3u);
  for (size_t k = 0; k < resumed.size(); ++k) EXPECT_TRUE(resumed[k] == whole[k + 2]);
  EXPECT_TRUE(run(options, &cmvn_, 0, kBatches, 99).empty());
}

TEST_F(LoaderTest, AFailingUtteranceIsReportedInOrderNamingItsFile) {
  fs::remove(manifest_.utterances[9].audio_path);
  for (int workers : {0, 1, 4}) {
    LoaderOptions options;
    options.workers = workers;
    Loader loader(manifest_, *tokenizer_, *fbank_, &cmvn_, options);
    loader.start_epoch(0, kBatches);
    Batch batch;
    ASSERT_TRUE(loader.next(batch));
    ASSERT_TRUE(loader.next(batch));
    try {
      loader.next(batch);  // {9, 2}
      ADD_FAILURE() << "no error for a missing file";
    } catch (const Error& error) {
      EXPECT_EQ(error.code(), ExitCode::kBadInput);
      EXPECT_THAT(error.what(),
                  testing::HasSubstr("utterance utt9 (" + manifest_.utterances[9].audio_path +
                                     ", " + manifest_.path + ":10)"));
    }
    EXPECT_FALSE(loader.next(batch));  // the epoch ended
  }
}

TEST_F(LoaderTest, PoolBuffersAreReused) {
  // Equal-length batches: after each buffer's first use nothing is allocated,
  // so only queue_depth + 1 distinct feature buffers ever reach the caller.
  std::vector<std::vector<size_t>> batches(12, std::vector<size_t>{3, 3});
  LoaderOptions options;
  options.workers = 2;
  options.queue_depth = 3;
  Loader loader(manifest_, *tokenizer_, *fbank_, &cmvn_, options);
  std::set<const float*> buffers;
  Batch batch;
  for (int epoch = 0; epoch < 2; ++epoch) {
    loader.start_epoch(epoch, batches);
    while (loader.next(batch)) buffers.insert(batch.features.data());
  }
  EXPECT_LE(buffers.size(), 4u);
}

TEST_F(LoaderTest, StopsCleanlyMidEpoch) {
  std::vector<std::vector<size_t>> batches(50, std::vector<size_t>{0, 1, 2});
  LoaderOptions options;
  options.workers = 4;
  options.queue_depth = 2;
  Batch batch;
  {
    Loader loader(manifest_, *tokenizer_, *fbank_, &cmvn_, options);
    loader.start_epoch(0, batches);
    ASSERT_TRUE(loader.next(batch));
    loader.start_epoch(1, kBatches);  // restart while workers wait for free slots
    int count = 0;
    while (loader.next(batch)) ++count;
    EXPECT_EQ(count, 5);
    loader.start_epoch(2, batches);
    ASSERT_TRUE(loader.next(batch));
  }  // destroyed with workers blocked on a full queue
  SUCCEED();
}

// Threads of this process at lowered priority: SCHED_IDLE, or nice 19.
int threads_at_low_priority() {
  int count = 0;
  for (const ThreadScheduling& thread : thread_scheduling()) {
    if (thread.policy == SCHED_IDLE || thread.nice == 19) ++count;
  }
  return count;
}

double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec) +
         1e-6 * double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec);
}

TEST_F(LoaderTest, WorkersRunAtIdlePriorityAndTheirCpuTimeIsCounted) {
  const int before = threads_at_low_priority();
  const double process_before = process_cpu_seconds();
  std::vector<std::vector<size_t>> batches(20, std::vector<size_t>{0, 1, 2, 3});
  LoaderOptions options;
  options.workers = 3;
  options.queue_depth = 2;
  Loader loader(manifest_, *tokenizer_, *fbank_, &cmvn_, options);
  EXPECT_EQ(loader.worker_cpu_seconds(), 0.0);
  loader.start_epoch(0, batches);
  Batch batch;
  ASSERT_TRUE(loader.next(batch));
  // A worker lowers its own priority when it first runs, which on a busy
  // machine can come after another worker's batch was delivered: wait for it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (threads_at_low_priority() - before < 3 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_EQ(threads_at_low_priority() - before, 3);
  while (loader.next(batch)) {
  }
  // Every batch was built by a worker: their CPU time is positive and within
  // what the whole process used meanwhile.
  const double workers = loader.worker_cpu_seconds();
  EXPECT_GT(workers, 0.0);
  EXPECT_LE(workers, process_cpu_seconds() - process_before + 0.01);
}

TEST_F(LoaderTest, RejectsBadConfiguration) {
  LoaderOptions both;
  both.per_utterance_cmvn = true;
  EXPECT_THROW(Loader(manifest_, *tokenizer_, *fbank_, &cmvn_, both), Error);
  LoaderOptions options;
  Loader loader(manifest_, *tokenizer_, *fbank_, nullptr, options);
  EXPECT_THROW(loader.start_epoch(0, {{0, 10}}), Error);
  manifest_.utterances[4].transcript = "bad \xC3";
  EXPECT_THROW(Loader(manifest_, *tokenizer_, *fbank_, nullptr, options), Error);
}

}  // namespace
}  // namespace mpiasr
