// Data preparation: tokenizer and CMVN statistics; see data_prep.h.
#include "src/data_prep.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <iomanip>
#include <thread>

#include "io/audio.h"
#include "io/tokenizer.h"
#include "mpi/broadcast.h"
#include "mpi/run_on.h"
#include "src/base/error.h"
#include "src/base/file.h"
#include "src/dataset.h"
#include "src/feature_pipeline.h"
#include "src/progress.h"
#include "src/utterance_length.h"

namespace mpiasr {

namespace {

constexpr size_t kCmvnChunk = 64;  // utterances summed together before merging

bool exists(const std::string& path) {
  return !path.empty() && std::filesystem::exists(path);
}

// The folder of the file that config key `key` names (output.dir by default).
void make_parent_dir(const std::string& path, const char* key) {
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty())
    make_folders(parent.string(), std::string(key) + "'s folder", ExitCode::kUsage);
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void make_tokenizer(const Config& config, const Manifest& train, std::ostream& log) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::string> transcripts;
  transcripts.reserve(train.utterances.size());
  for (const Utterance& utterance : train.utterances) transcripts.push_back(utterance.transcript);
  TokenizerOptions options;
  options.kind = std::string(to_string(config.tokenizer.type));
  options.vocab_size = config.tokenizer.vocab_size;
  std::unique_ptr<Tokenizer> tokenizer = train_tokenizer(transcripts, options);
  make_parent_dir(config.tokenizer.model_path, "tokenizer.model_path");
  tokenizer->save(config.tokenizer.model_path);
  log << "tokenizer: " << options.kind << ", " << tokenizer->vocab_size()
      << " outputs (blank included), " << config.tokenizer.model_path << " (" << std::fixed
      << std::setprecision(1) << seconds_since(start) << " s)\n"
      << std::defaultfloat;
}

void make_cmvn(const Config& config, const Manifest& train, std::ostream& log) {
  const auto start = std::chrono::steady_clock::now();
  Fbank fbank(fbank_options(config.features, FeatureUse::kEvaluation));
  const int threads = int(std::max(1u, std::thread::hardware_concurrency()));
  CmvnStats stats = compute_cmvn_stats(train, fbank, threads, &log);
  make_parent_dir(config.features.cmvn_path, "features.cmvn_path");
  stats.save(config.features.cmvn_path);
  log << "cmvn: " << std::fixed << std::setprecision(0) << stats.frames << " frames, "
      << config.features.cmvn_path << " (" << std::setprecision(1) << seconds_since(start)
      << " s)\n"
      << std::defaultfloat;
}

}  // namespace

void prepare_data(const Config& config, const mpi::Context& ctx, const PrepareOptions& options,
                  std::ostream& log) {
  mpi::run_on_main(ctx, [&] {
    const bool need_tokenizer = options.force || !exists(config.tokenizer.model_path);
    const bool need_cmvn = config.features.cmvn == CmvnMode::kGlobal &&
                           (options.force || !exists(config.features.cmvn_path));
    if (!need_tokenizer && !need_cmvn && !options.check_samples) return;
    DatasetOptions dataset_options;
    dataset_options.samples =
        options.check_samples ? SampleCheck::kAlways : SampleCheck::kWithSkipBad;
    Manifest train =
        load_dataset(config, config.data.train_manifest, "train", dataset_options, &log);
    Manifest valid;
    if (options.check_samples && !config.data.valid_manifest.empty()) {
      valid = load_dataset(config, config.data.valid_manifest, "valid", dataset_options, &log);
    }
    if (need_tokenizer) make_tokenizer(config, train, log);
    // The length check of train's start-up, before the statistics: what it
    // drops (data.skip_bad) counts in neither file, and the tokenizer is made
    // again without their transcripts, so both files are those of the
    // utterances train keeps, with or without prepare first.
    const Fbank fbank(fbank_options(config.features, FeatureUse::kEvaluation));
    const size_t too_short =
        check_utterance_lengths(train, *load_tokenizer(config.tokenizer.model_path), fbank,
                                config.data.skip_bad, "train", &log);
    if (too_short > 0 && need_tokenizer) {
      log << "tokenizer: made again without the " << too_short << " utterances dropped\n";
      make_tokenizer(config, train, log);
    }
    if (!valid.utterances.empty()) {
      check_utterance_lengths(valid, *load_tokenizer(config.tokenizer.model_path), fbank,
                              config.data.skip_bad, "valid", &log);
    }
    if (need_cmvn) make_cmvn(config, train, log);
  });
  mpi::broadcast_file(ctx, config.tokenizer.model_path);
  if (config.features.cmvn == CmvnMode::kGlobal) {
    mpi::broadcast_file(ctx, config.features.cmvn_path);
  }
}

CmvnStats compute_cmvn_stats(const Manifest& manifest, const Fbank& fbank, int threads,
                             std::ostream* log) {
  const size_t n = manifest.utterances.size();
  const size_t chunks = (n + kCmvnChunk - 1) / kCmvnChunk;
  const int n_mels = fbank.options().n_mels;
  std::vector<CmvnStats> chunk_stats(chunks);
  std::vector<std::exception_ptr> errors(size_t(std::max(threads, 1)));
  std::atomic<size_t> next{0}, done{0};
  ProgressThrottle throttle(10.0);
  auto work = [&](size_t worker) {
    try {
      std::vector<float> feats;
      for (size_t chunk = next++; chunk < chunks; chunk = next++, ++done) {
        if (worker == 0 && log && throttle.ready()) {
          const double fraction = double(done) / double(chunks);
          *log << "cmvn: " << std::fixed << std::setprecision(0) << 100 * fraction << "% of " << n
               << " utterances, ETA "
               << format_duration(throttle.elapsed() * (1 - fraction) / std::max(fraction, 1e-9))
               << std::defaultfloat << std::endl;
        }
        for (size_t i = chunk * kCmvnChunk; i < std::min(n, (chunk + 1) * kCmvnChunk); ++i) {
          const Utterance& u = manifest.utterances[i];
          std::vector<float> samples;
          try {
            samples = read_audio(u.audio_path, u.offset, u.duration, fbank.options().sample_rate);
          } catch (const Error& e) {
            throw Error(e.code(), to_string(InputProblem{manifest.path, u.line, e.what()}));
          }
          const int frames = fbank.num_frames(samples.size());
          feats.resize(size_t(frames) * size_t(n_mels));
          fbank.compute(samples.data(), samples.size(), feats.data());
          chunk_stats[chunk].accumulate(feats.data(), frames, n_mels);
        }
      }
    } catch (...) {
      errors[worker] = std::current_exception();
      next = chunks;
    }
  };
  std::vector<std::thread> workers;
  for (size_t t = 1; t < errors.size(); ++t) workers.emplace_back(work, t);
  work(0);
  for (std::thread& worker : workers) worker.join();
  for (const std::exception_ptr& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  CmvnStats total;
  for (const CmvnStats& stats : chunk_stats) total.merge(stats);
  MPIASR_CHECK(total.frames > 0, "no feature frames in " << manifest.path);
  return total;
}

}  // namespace mpiasr
