// The batch loader; see loader.h.
#include "io/loader.h"

#include <algorithm>
#include <cstring>

#include "io/feature_stream.h"
#include "io/speed_perturb.h"
#include "src/base/error.h"
#include "src/base/rng.h"
#include "src/base/thread_cpu.h"
#include "src/base/thread_policy.h"

namespace mpiasr {

namespace {

// The dither seed of utterance i in epoch e: splitmix64 chained over
// (seed, e, i), in a stream of its own (distinct from spec_augment_seed's).
uint64_t dither_seed(uint64_t seed, uint64_t epoch, uint64_t utterance) {
  constexpr uint64_t kDitherStream = 0x64697468657200ULL;  // "dither"
  return derive_seed({seed ^ kDitherStream, epoch, utterance});
}

std::string describe(const Manifest& manifest, const Utterance& utterance) {
  return "utterance " + utterance.id + " (" + utterance.audio_path + ", " + manifest.path + ":" +
         std::to_string(utterance.line) + ")";
}

}  // namespace

Loader::Loader(const Manifest& manifest, const Tokenizer& tokenizer, const Fbank& fbank,
               const Cmvn* cmvn, LoaderOptions options)
    : manifest_(manifest), fbank_(fbank), cmvn_(cmvn), options_(std::move(options)) {
  MPIASR_CHECK(options_.frame_multiple >= 1, "loader: frame_multiple " << options_.frame_multiple);
  if (options_.workers < 0 || options_.queue_depth < 1) {
    MPIASR_FAIL(ExitCode::kUsage, "loader: workers " << options_.workers
                                                     << " must be >= 0 and queue_depth "
                                                     << options_.queue_depth << " >= 1");
  }
  if (cmvn_ && options_.per_utterance_cmvn) {
    MPIASR_FAIL(ExitCode::kUsage, "loader: global CMVN and per-utterance CMVN are exclusive");
  }
  int n_mels = fbank_.options().n_mels;
  if (cmvn_ && (cmvn_->mean.size() != static_cast<size_t>(n_mels) ||
                cmvn_->inv_std.size() != static_cast<size_t>(n_mels))) {
    MPIASR_FAIL(ExitCode::kUsage, "loader: CMVN statistics have "
                                      << cmvn_->mean.size() << " bins, the features " << n_mels);
  }
  tokens_.reserve(manifest_.utterances.size());
  for (const Utterance& utterance : manifest_.utterances) {
    try {
      std::vector<int> ids = tokenizer.encode(utterance.transcript);
      tokens_.emplace_back(ids.begin(), ids.end());
    } catch (const Error& error) {
      throw Error(error.code(), describe(manifest_, utterance) + ": transcript: " + error.what());
    }
  }
  slots_.resize(options_.queue_depth);
}

Loader::~Loader() {
  stop_workers();
}

void Loader::stop_workers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  consumed_.notify_all();
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
}

void Loader::start_epoch(int epoch, std::vector<std::vector<size_t>> batches, size_t start_index) {
  stop_workers();
  for (const auto& batch : batches) {
    MPIASR_CHECK(!batch.empty(), "loader: empty batch in epoch " << epoch);
    for (size_t i : batch) {
      MPIASR_CHECK(i < manifest_.utterances.size(),
                   "loader: utterance " << i << " of a batch is outside the manifest of "
                                        << manifest_.utterances.size());
    }
  }
  batches_ = std::move(batches);
  epoch_ = epoch;
  next_claim_ = next_deliver_ = std::min(start_index, batches_.size());
  for (Slot& slot : slots_) {
    slot.number = SIZE_MAX;
    slot.error = nullptr;
  }
  stop_ = false;
  for (int w = 0; w < options_.workers; ++w) threads_.emplace_back(&Loader::work, this);
}

bool Loader::next(Batch& out) {
  if (next_deliver_ >= batches_.size()) return false;
  if (options_.workers == 0) {
    try {
      make_batch(batches_[next_deliver_], epoch_, out, caller_scratch_);
    } catch (...) {
      batches_.clear();
      next_deliver_ = 0;
      throw;
    }
    ++next_deliver_;
    return true;
  }
  Slot& slot = slots_[next_deliver_ % slots_.size()];
  std::unique_lock<std::mutex> lock(mutex_);
  produced_.wait(lock, [&] { return slot.number == next_deliver_; });
  if (slot.error) {
    std::exception_ptr error = slot.error;
    lock.unlock();
    stop_workers();
    batches_.clear();
    next_deliver_ = 0;
    std::rethrow_exception(error);
  }
  std::swap(out, slot.batch);
  slot.number = SIZE_MAX;
  ++next_deliver_;
  lock.unlock();
  consumed_.notify_all();
  return true;
}

void Loader::work() {
  lower_thread_priority();  // see loader.h
  Scratch scratch;
  const size_t depth = slots_.size();
  while (true) {
    size_t number;
    {
      std::unique_lock<std::mutex> lock(mutex_);
      if (stop_ || next_claim_ >= batches_.size()) return;
      number = next_claim_++;
      // The slot is free once the batch it held (number - depth) was handed over.
      consumed_.wait(lock, [&] { return stop_ || number < next_deliver_ + depth; });
      if (stop_) return;
    }
    Slot& slot = slots_[number % depth];
    std::exception_ptr error;
    const double cpu_begin = thread_cpu_seconds();
    try {
      make_batch(batches_[number], epoch_, slot.batch, scratch);
    } catch (...) {
      error = std::current_exception();
    }
    worker_cpu_ns_ += int64_t((thread_cpu_seconds() - cpu_begin) * 1e9);
    {
      std::lock_guard<std::mutex> lock(mutex_);
      slot.error = error;
      slot.number = number;
    }
    produced_.notify_all();
  }
}

void Loader::compute_features(size_t index, int epoch, std::vector<float>& feats, int& frames,
                              double& seconds) const {
  const Utterance& utterance = manifest_.utterances[index];
  const int n_mels = fbank_.options().n_mels;
  const int sample_rate = fbank_.options().sample_rate;
  std::vector<float> samples =
      read_audio(utterance.audio_path, utterance.offset, utterance.duration, sample_rate);
  if (!options_.speed_factors.empty()) {
    samples = speed_perturb(samples, sample_rate,
                            speed_factor(options_.speed_factors, options_.seed, epoch, index));
  }
  frames = fbank_.num_frames(samples.size());
  if (frames <= 0) {
    MPIASR_FAIL(ExitCode::kBadInput, "no feature frames from " << samples.size() << " samples");
  }
  feats.resize(static_cast<size_t>(frames) * n_mels);
  fbank_.compute(samples.data(), samples.size(), feats.data(),
                 dither_seed(options_.seed, epoch, index));
  if (cmvn_) cmvn_->apply(feats.data(), frames, n_mels);
  if (options_.per_utterance_cmvn) normalize_per_utterance(feats.data(), frames, n_mels);
  if (options_.spec_augment) {
    spec_augment(feats.data(), frames, n_mels, options_.spec_augment_options,
                 spec_augment_seed(options_.seed, epoch, index));
  }
  seconds = static_cast<double>(samples.size()) / sample_rate;
}

template <typename F>
void Loader::naming_utterance(size_t index, F&& f) const {
  try {
    f();
  } catch (const Error& error) {
    throw Error(error.code(),
                describe(manifest_, manifest_.utterances[index]) + ": " + error.what());
  } catch (const std::exception& error) {
    throw Error(ExitCode::kFailure,
                describe(manifest_, manifest_.utterances[index]) + ": " + error.what());
  }
}

void Loader::stream_features(size_t index, const std::function<void(FeatureStream&)>& use) const {
  MPIASR_CHECK(options_.speed_factors.empty() && !options_.spec_augment,
               "loader: features are streamed for evaluation only, without speed perturbation "
               "or SpecAugment");
  naming_utterance(index, [&] {
    const Utterance& utterance = manifest_.utterances[index];
    FeatureStream stream(utterance.audio_path, utterance.offset, utterance.duration, fbank_, cmvn_,
                         options_.per_utterance_cmvn);
    use(stream);
  });
}

void Loader::make_batch(const std::vector<size_t>& utterances, int epoch, Batch& out,
                        Scratch& scratch) const {
  const size_t count = utterances.size();
  const int n_mels = fbank_.options().n_mels;
  if (scratch.features.size() < count) scratch.features.resize(count);
  scratch.frames.resize(count);
  double seconds = 0;
  for (size_t b = 0; b < count; ++b) {
    const size_t index = utterances[b];
    double utterance_seconds = 0;
    naming_utterance(index, [&] {
      compute_features(index, epoch, scratch.features[b], scratch.frames[b], utterance_seconds);
    });
    seconds += utterance_seconds;
  }

  const int longest = *std::max_element(scratch.frames.begin(), scratch.frames.end());
  const int max_frames = round_up_frames(longest, options_.frame_multiple);
  const size_t row = static_cast<size_t>(max_frames) * n_mels;
  out.batch_size = static_cast<int>(count);
  out.max_frames = max_frames;
  out.n_mels = n_mels;
  out.audio_seconds = seconds;
  out.utterance_indices.assign(utterances.begin(), utterances.end());
  out.features.resize(count * row);
  out.frame_lengths.resize(count);
  out.target_lengths.resize(count);
  size_t total_targets = 0;
  for (size_t index : utterances) total_targets += tokens_[index].size();
  out.targets.resize(total_targets);

  size_t target_offset = 0;
  for (size_t b = 0; b < count; ++b) {
    float* features = out.features.data() + b * row;
    size_t filled = static_cast<size_t>(scratch.frames[b]) * n_mels;
    std::memcpy(features, scratch.features[b].data(), filled * sizeof(float));
    std::memset(features + filled, 0, (row - filled) * sizeof(float));
    out.frame_lengths[b] = scratch.frames[b];
    const std::vector<int32_t>& tokens = tokens_[utterances[b]];
    out.target_lengths[b] = static_cast<int32_t>(tokens.size());
    std::copy(tokens.begin(), tokens.end(), out.targets.data() + target_offset);
    target_offset += tokens.size();
  }
}

}  // namespace mpiasr
