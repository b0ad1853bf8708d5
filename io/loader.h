// The batch loader: turns the sampler's batches (lists of utterance indices)
// into padded feature batches, ahead of the trainer, on worker threads.
//
// Per utterance i of epoch e:
//   samples  = read_audio(path, offset, duration, fbank sample rate)
//   samples  = speed_perturb(samples, speed_factor(factors, seed, e, i))  when factors are given
//   feats    = Fbank::compute(samples, dither seed = f(seed, e, i))      [frames, n_mels]
//   feats    = global CMVN (a Cmvn given), or per-utterance CMVN, or nothing
//   feats    = spec_augment(feats, seed = spec_augment_seed(seed, e, i))  when enabled
//   tokens   = tokenizer.encode(transcript), computed once in the constructor
// and a batch of B utterances is laid out as io/batch.h says: features
// [B, T, n_mels] zero-padded to the longest utterance T, frame and target
// lengths, targets concatenated. Transcripts are encoded as they are in the
// manifest; normalize them (normalize_text) before building the loader.
//
// Threads and hand-off. With workers = 0, next() builds the batch in the
// caller's thread. With workers = N > 0, N threads build batches ahead into a
// fixed pool of queue_depth Batch objects: batch k of the epoch goes to slot
// k mod queue_depth once batch k - queue_depth has been handed over. next()
// waits for the next batch in order and swaps it with the caller's Batch, so
// the caller's previous buffers go back into the pool: queue_depth + 1 Batch
// objects circulate and, once their buffers have grown to the largest batch,
// nothing is allocated per batch. Every value depends only on (seed, epoch,
// utterance), never on thread timing, so the batches are bit-identical for
// any number of workers.
//
// Priority. The workers run under SCHED_IDLE (Linux): they take a core only
// when no thread of normal priority wants it, so they never slow the
// threads that compute a step (on a node whose cores all compute, a worker
// that shares a core with a compute thread at equal priority stretches that
// thread's part of every OpenMP region, and with several ranks makes one rank
// late for the gradient all-reduce). They build batches in the gaps compute
// leaves: OpenMP's barriers and serial parts, waits for the all-reduce and
// for the next batch. If they fall behind, next() blocks, its core idles and
// runs them, so a step waits at most as long as building one batch takes.
// Where SCHED_IDLE is refused they run at nice 19. worker_cpu_seconds()
// measures what they cost.
//
// Errors. An utterance that fails (unreadable audio, no frames) is reported
// by the next() that would return its batch, as Error naming the utterance
// id, its audio file and its manifest line; the epoch then ends. The
// destructor and start_epoch() stop and join the workers at any point of an
// epoch.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "io/batch.h"
#include "io/cmvn.h"
#include "io/fbank.h"
#include "io/manifest.h"
#include "io/spec_augment.h"
#include "io/tokenizer.h"

namespace mpiasr {

class FeatureStream;

struct LoaderOptions {
  int workers = 2;      // threads building batches; 0 = in the caller's thread
  int queue_depth = 4;  // batches built ahead of the consumer (workers > 0)
  bool spec_augment = false;
  SpecAugmentOptions spec_augment_options;
  bool per_utterance_cmvn = false;    // exclusive with a global Cmvn
  std::vector<double> speed_factors;  // speed perturbation (io/speed_perturb.h); empty = none
  uint64_t seed = 0;
  int frame_multiple = 1;  // a batch's frames padded up to a multiple of this
};

// frames rounded up to a multiple of `multiple` (>= 1).
inline int round_up_frames(int frames, int multiple) {
  return (frames + multiple - 1) / multiple * multiple;
}

class Loader {
 public:
  // manifest, tokenizer, fbank and cmvn (nullable: no global CMVN) must outlive the loader.
  Loader(const Manifest& manifest, const Tokenizer& tokenizer, const Fbank& fbank, const Cmvn* cmvn,
         LoaderOptions options);
  Loader(const Loader&) = delete;
  Loader& operator=(const Loader&) = delete;
  ~Loader();

  // Starts (or restarts) an epoch over `batches` (Sampler::epoch_batches),
  // beginning at batch start_index (a resumed position).
  void start_epoch(int epoch, std::vector<std::vector<size_t>> batches, size_t start_index = 0);
  // Swaps the next batch into `out`; false at the end of the epoch.
  bool next(Batch& out);

  // CPU seconds the worker threads spent building batches, since construction.
  double worker_cpu_seconds() const { return double(worker_cpu_ns_.load()) * 1e-9; }

  // Runs use() on a stream of utterance i's features (io/feature_stream.h:
  // computed a window at a time, the features a batch would hold); an error
  // of either is rethrown with the utterance named, as a batch's is.
  // Evaluation only: the loader has no speed perturbation or SpecAugment.
  void stream_features(size_t utterance, const std::function<void(FeatureStream&)>& use) const;

  const Fbank& fbank() const { return fbank_; }
  // Token ids of utterance i's transcript.
  const std::vector<int32_t>& tokens(size_t utterance) const { return tokens_[utterance]; }

 private:
  // Per-thread buffers for the features of one batch before padding.
  struct Scratch {
    std::vector<std::vector<float>> features;  // [B][frames * n_mels]
    std::vector<int> frames;                   // [B]
  };
  struct Slot {
    Batch batch;
    size_t number = SIZE_MAX;  // the epoch's batch this slot holds, SIZE_MAX when none
    std::exception_ptr error;
  };

  void make_batch(const std::vector<size_t>& utterances, int epoch, Batch& out,
                  Scratch& scratch) const;
  void compute_features(size_t utterance, int epoch, std::vector<float>& feats, int& frames,
                        double& seconds) const;
  // Runs f(), an error rethrown with utterance i named.
  template <typename F>
  void naming_utterance(size_t utterance, F&& f) const;
  void work();
  void stop_workers();

  const Manifest& manifest_;
  const Fbank& fbank_;
  const Cmvn* cmvn_;
  LoaderOptions options_;
  std::vector<std::vector<int32_t>> tokens_;  // per manifest utterance

  std::vector<std::vector<size_t>> batches_;  // this epoch's
  int epoch_ = 0;
  size_t next_claim_ = 0;    // the next batch a worker will build
  size_t next_deliver_ = 0;  // the next batch next() hands over
  Scratch caller_scratch_;   // workers = 0

  std::mutex mutex_;
  std::condition_variable produced_;  // a slot received its batch (or error)
  std::condition_variable consumed_;  // a batch was handed over, or stop_
  bool stop_ = false;
  std::vector<Slot> slots_;
  std::vector<std::thread> threads_;
  std::atomic<int64_t> worker_cpu_ns_{0};
};

}  // namespace mpiasr
