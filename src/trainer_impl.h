// The training loop of src/trainer.h, for a model type <Act, Acc> on its
// backend. Included by the translation unit that instantiates it for the
// backends it builds (src/trainer.cpp: the CPU, <float, float>).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "io/checksum.h"
#include "io/loader.h"
#include "io/sampler.h"
#include "io/tokenizer.h"
#include "model/conformer.h"
#include "model/loss_scaler.h"
#include "model/lr_schedule.h"
#include "model/optimizer.h"
#include "mpi/agreement.h"
#include "mpi/checkpoint_writers.h"
#include "mpi/collectives.h"
#include "mpi/gradient_reducer.h"
#include "mpi/run_on.h"
#include "src/base/error.h"
#include "src/base/rng.h"
#include "src/batch_plan.h"
#include "src/data_prep.h"
#include "src/dataset.h"
#include "src/evaluation.h"
#include "src/feature_pipeline.h"
#include "src/gradient_sync.h"
#include "src/metrics_log.h"
#include "src/model_config.h"
#include "src/output_prior.h"
#include "src/progress.h"
#include "src/stop_signal.h"
#include "src/trainer.h"
#include "src/training_checkpoint.h"
#include "src/utterance_length.h"

namespace mpiasr {

namespace trainer_detail {

// The dropout seed of one micro-batch: splitmix64 chained over (seed, step, rank, micro-batch).
inline uint64_t dropout_seed(uint64_t seed, int64_t step, int rank, int micro_batch) {
  constexpr uint64_t kDropoutStream = 0x64726f706f7574ull;  // "dropout"
  return derive_seed(
      {seed ^ kDropoutStream, uint64_t(step), uint64_t(rank), uint64_t(micro_batch)});
}

inline std::string percent(double ratio) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(2) << 100 * ratio << "%";
  return out.str();
}

}  // namespace trainer_detail

template <typename Act, typename Acc>
class Trainer {
 public:
  // make_gradient_sync makes the all-reduce of a multi-rank run; empty: the
  // MPI GradientReducer over host memory (the CPU backend).
  Trainer(const Config& config, mpi::Context& ctx, Backend<Act, Acc>& backend, int threads,
          std::ostream& log, GradientSyncFactory make_gradient_sync = {})
      : config_(config),
        ctx_(ctx),
        backend_(backend),
        threads_(threads),
        log_(log),
        make_gradient_sync_(std::move(make_gradient_sync)) {}

  TrainResult run(const TrainOptions& options);

 private:
  using Clock = std::chrono::steady_clock;

  void load_data();
  void build_model();
  void resume();
  // One optimizer step; returns whether any rank was asked to stop. Sets
  // time_spent_ when any rank found training.max_minutes spent as it began.
  // Nothing in it waits for the device.
  bool train_step();
  // Reads the step control back (the wait for the device, before progress
  // lines, validations and checkpoints): stops a diverged run, takes the
  // optimizer and scaler state into state_ and the sums into interval_.
  void read_step_state();
  void log_progress();
  // output.timeline: appends the step that began at `begin` to interval_.timeline.
  void record_timeline(Clock::time_point begin, Clock::time_point compute_begin,
                       Clock::time_point backward_end, Clock::time_point wait_end);
  // output.timeline: writes the interval's steps, every rank's times, as
  // "timeline" lines (collective).
  void write_timelines();
  // output.diagnostic_steps: the "diagnostics" line of the step in progress
  // (collective), from its blank statistics (this rank's) and its gradient,
  // all-reduced and not yet unscaled, before the optimizer updates the
  // weights.
  void write_diagnostics(BlankStatistics blanks, double loss_divisor);
  // The batch log's line for micro-batch `micro` of `step`.
  nlohmann::json batch_record(const Batch& batch, int64_t step, int micro) const;
  // Returns whether the validation CER improved on the best so far.
  bool validate();
  void save_checkpoint();
  // 1 when this rank was started by a launcher (mpirun, srun) that is gone
  // (src/stop_signal.h), else 0; summed over ranks, so all stop together.
  double launcher_gone() const {
    return ctx_.world_size() > 1 && StopSignals::parent_changed() ? 1.0 : 0.0;
  }
  // Ends every rank (all call it together) without a checkpoint: its log
  // line would be lost with the launcher's output.
  [[noreturn]] void stop_without_launcher(const std::string& where) const {
    throw mpi::CollectiveError(
        ExitCode::kDistributed,
        "the launcher is gone (mpirun or srun ended; this rank's parent process changed), so "
        "nothing the run logs is seen: stopped " +
            where + " without writing a checkpoint; resume from the last one logged");
  }
  // The optimizer's state by name on the writer ranks (empty elsewhere);
  // sharded, every rank's pieces are gathered to them (collective).
  NamedTensors optimizer_state_for_writers();
  int64_t steps_in_epoch(int epoch) const {
    const int64_t batches = int64_t(sampler_->batches_per_epoch(epoch));
    return (batches + config_.training.accumulation - 1) / config_.training.accumulation;
  }
  double epoch_progress() const {
    return state_.epoch + double(state_.batch_in_epoch) / double(state_.batches_in_epoch);
  }
  // Wall time trained: the earlier runs' (from the checkpoint) and this one's so far.
  double train_seconds() const {
    return seconds_before_ + std::chrono::duration<double>(Clock::now() - run_begin_).count();
  }
  double time_left() const { return 60 * config_.training.max_minutes - train_seconds(); }
  bool has_time_budget() const { return config_.training.max_minutes > 0; }

  const Config& config_;
  mpi::Context& ctx_;
  Backend<Act, Acc>& backend_;
  const int threads_;
  std::ostream& log_;
  GradientSyncFactory make_gradient_sync_;
  bool is_writer_ = false;

  std::unique_ptr<Tokenizer> tokenizer_;
  Manifest train_, valid_;
  std::unique_ptr<FeaturePipeline> train_features_, eval_features_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Loader> train_loader_, valid_loader_;
  std::vector<std::vector<size_t>> valid_batches_;
  DecodeWindowing windowing_;  // validation's (utterances over data.max_utterance_seconds)
  std::string train_hash_, valid_hash_;

  std::unique_ptr<Conformer<Act, Acc>> model_;
  std::unique_ptr<Optimizer<Act, Acc>> optimizer_;
  std::unique_ptr<LossScaler> scaler_;
  std::unique_ptr<LrSchedule> schedule_;
  std::unique_ptr<GradientSync> reducer_;
  bool sharded_ = false;  // ZeRO-1: the optimizer owns this rank's pieces only
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<MetricsLog> batch_log_;  // output.batch_log: this rank's batches
  std::vector<Batch> micro_batches_;

  TrainingState state_;
  int loader_epoch_ = -1;  // the epoch the train loader was started on
  int64_t start_step_ = 0;
  Clock::time_point start_time_;  // of this run's first step
  Clock::time_point run_begin_;   // of this run, data loading included
  double seconds_before_ = 0;     // trained by earlier runs (the checkpoint's train_seconds)
  bool time_spent_ = false;       // training.max_minutes ran out: this step is the last

  // Sums since the last progress line (this rank's; all-reduced when printed).
  struct Interval {
    double loss = 0, tokens = 0, utterances = 0, audio_seconds = 0;
    double grad_norm = 0;  // sum over applied steps (the norm is the same on every rank)
    int64_t steps = 0;
    int64_t skipped = 0;  // steps skipped for a non-finite gradient (fp16)
    double seconds = 0;   // inside train_step
    // Per step, the time blocked in the gradient all-reduce after backward
    // (not hidden), this rank's.
    std::vector<double> step_comm_waits;
    double comm_cpu = 0;  // CPU time of the reducer's communication thread
    // output.timeline: per step, this rank's times and its buckets' (record_timeline).
    std::vector<double> timeline;
  } interval_;
  double loader_cpu_before_ = 0;  // the train loader's worker CPU time at the last progress line
  int64_t step_at_clear_ = 0;     // state_.step when the control's sums were last cleared
};

template <typename Act, typename Acc>
void Trainer<Act, Acc>::load_data() {
  prepare_data(config_, ctx_, PrepareOptions{}, log_);
  tokenizer_ = load_tokenizer(config_.tokenizer.model_path);

  // Rank 0 reads the audio headers first, filling the manifests' duration
  // caches, so the other ranks read the cache instead of every header.
  std::ostringstream quiet;
  mpi::run_on_main(ctx_, [&] {
    const DatasetOptions headers{.samples = SampleCheck::kHeaders};
    load_dataset(config_, config_.data.train_manifest, "train", headers, &quiet);
    if (!config_.data.valid_manifest.empty()) {
      load_dataset(config_, config_.data.valid_manifest, "valid", headers, &quiet);
    }
  });
  // Utterances too short for the model are bad utterances (src/utterance_length.h),
  // found here rather than mid-run. A tokenizer of their own, so the OOV counts
  // reported below count each transcript once.
  const Fbank fbank(fbank_options(config_.features, FeatureUse::kEvaluation));
  const std::unique_ptr<Tokenizer> check_tokenizer = load_tokenizer(config_.tokenizer.model_path);
  // With data.skip_bad every rank decodes every sample here (src/dataset.h,
  // SampleCheck) on its share of the cores.
  const DatasetOptions checked{.threads = threads_};
  train_ = load_dataset(config_, config_.data.train_manifest, "train", checked, &log_);
  check_utterance_lengths(train_, *check_tokenizer, fbank, config_.data.skip_bad, "train", &log_);
  train_hash_ = hash_hex(manifest_hash(train_));
  mpi::check_agreement(ctx_, "train manifest", manifest_hash(train_));
  if (!config_.data.valid_manifest.empty()) {
    valid_ = load_dataset(config_, config_.data.valid_manifest, "valid", checked, &log_);
    check_utterance_lengths(valid_, *check_tokenizer, fbank, config_.data.skip_bad, "valid", &log_);
    valid_hash_ = hash_hex(manifest_hash(valid_));
    mpi::check_agreement(ctx_, "valid manifest", manifest_hash(valid_));
  }

  train_features_ =
      std::make_unique<FeaturePipeline>(config_, FeatureUse::kTraining, config_.features.cmvn_path);
  eval_features_ = std::make_unique<FeaturePipeline>(config_, FeatureUse::kEvaluation,
                                                     config_.features.cmvn_path);
  train_loader_ = std::make_unique<Loader>(train_, *tokenizer_, train_features_->fbank,
                                           train_features_->global_cmvn(), train_features_->loader);
  if (tokenizer_->oov_count() > 0) log_ << "train: " << tokenizer_->oov_report() << "\n";

  sampler_ = std::make_unique<Sampler>(utterance_durations(train_),
                                       sampler_options(config_, ctx_.world_size()),
                                       ctx_.world_rank(), ctx_.world_size());

  windowing_ = decode_windowing(config_, eval_features_->fbank);
  if (!valid_.utterances.empty()) {
    valid_loader_ = std::make_unique<Loader>(valid_, *tokenizer_, eval_features_->fbank,
                                             eval_features_->global_cmvn(), eval_features_->loader);
    valid_batches_ = evaluation_batches(utterance_durations(valid_), config_.batching,
                                        ctx_.world_rank(), ctx_.world_size(), windowing_.seconds);
  }
}

template <typename Act, typename Acc>
void Trainer<Act, Acc>::build_model() {
  const ConformerConfig model_config = conformer_config(config_, tokenizer_->vocab_size());
  // Every batch the sampler can make, and the validation batches. Speed
  // perturbation lengthens training audio by up to 1 / the smallest factor.
  const std::vector<double>& factors = train_features_->loader.speed_factors;
  const double stretch =
      factors.empty() ? 1.0
                      : 1.0 / std::min(*std::min_element(factors.begin(), factors.end()), 1.0);
  std::vector<BatchShape> shapes = sampler_batch_shapes(
      utterance_durations(train_), config_.batching, train_features_->fbank, stretch);
  const std::vector<BatchShape> valid_shapes = evaluation_batch_shapes(
      valid_batches_, utterance_durations(valid_), eval_features_->fbank, windowing_);
  shapes.insert(shapes.end(), valid_shapes.begin(), valid_shapes.end());
  sharded_ = config_.distributed.zero_stage == 1 && ctx_.world_size() > 1;
  // Sharded, the buffers are cut into whole pieces of world size x alignment.
  const size_t parameter_multiple =
      sharded_ ? size_t(ctx_.world_size()) * kParameterAlignment : kParameterAlignment;
  model_ = std::make_unique<Conformer<Act, Acc>>(backend_, model_config, BatchShapes(shapes),
                                                 config_.training.seed, parameter_multiple);
  if (config_.model.prior_bias) {
    // A tokenizer of its own, so the OOV counts reported stay the loader's.
    const std::unique_ptr<Tokenizer> counter = load_tokenizer(config_.tokenizer.model_path);
    const std::vector<double> log_prior =
        output_log_prior(train_, *counter, train_features_->fbank);
    const std::vector<Acc> bias(log_prior.begin(), log_prior.end());
    ParameterStore<Act, Acc>& params = model_->params();
    backend_.to_device(params.master() + params.info(params.index_of("ctc_head.bias")).offset,
                       bias.data(), bias.size() * sizeof(Acc));
    params.refresh_compute();
    log_ << "model: CTC head biases from the output prior of train, the blank's "
         << std::exp(log_prior[0]) << "\n";
  }
  log_ << "model: " << describe_model(config_, model_config) << "\n"
       << "model: " << std::fixed << std::setprecision(2) << model_->params().num_parameters() / 1e6
       << " M parameters; planned for " << describe_plan(model_->shapes()) << ", "
       << model_->arena_bytes() / double(1 << 20) << " MiB of activations\n"
       << std::defaultfloat;

  if (ctx_.world_size() > 1 && make_gradient_sync_) {
    reducer_ = make_gradient_sync_(model_->params().grad(), model_->params().size());
  } else if (ctx_.world_size() > 1) {
    reducer_ = std::make_unique<ReducerSync<mpi::GradientReducer>>(
        ctx_, model_->params().grad(), model_->params().size(), reducer_options(config_));
    log_ << "gradient " << (sharded_ ? "reduce-scatter" : "all-reduce") << ": MPI over "
         << ctx_.world_size() << " ranks, "
         << (config_.distributed.hierarchical ? "hierarchical" : "ring") << ", messages in "
         << to_string(config_.distributed.allreduce_dtype) << "\n";
  }
  optimizer_ = std::make_unique<Optimizer<Act, Acc>>(
      model_->params(), adamw_config(config_),
      sharded_ ? reducer_->shard_ranges(ctx_.world_rank()) : std::vector<OptimizerRange>{});
  scaler_ = std::make_unique<LossScaler>(loss_scaler_config(config_));
  optimizer_->set_state(0, scaler_->loss_scaler_state());
  if (sharded_) {
    log_ << "optimizer: ZeRO-1, AdamW state sharded over " << ctx_.world_size() << " ranks ("
         << std::fixed << std::setprecision(2)
         << 2.0 * double(optimizer_->state_elements()) * sizeof(Acc) / double(1 << 20)
         << " MiB of moments per rank)\n"
         << std::defaultfloat;
  }

  // The schedule's length: every epoch's steps, capped by max_steps.
  int64_t total_steps = 0;
  for (int epoch = 0; epoch < config_.training.epochs; ++epoch) {
    total_steps += steps_in_epoch(epoch);
  }
  if (config_.training.max_steps > 0)
    total_steps = std::min(total_steps, config_.training.max_steps);
  state_.total_steps = total_steps;

  schedule_ = std::make_unique<LrSchedule>(
      lr_schedule_config(config_, total_steps, model_config.d_model, ctx_.world_size()));
  const ScheduleConfig& s = config_.schedule;
  log_ << "schedule: " << to_string(s.type) << ", warmup " << s.warmup_steps << " steps, "
       << total_steps << " steps in all; global batch = " << ctx_.world_size() << " ranks x "
       << config_.training.accumulation << " micro-batches, LR x " << schedule_->batch_scale()
       << " (" << to_string(s.lr_scaling) << " scaling)\n";

  micro_batches_.resize(size_t(config_.training.accumulation));
}

template <typename Act, typename Acc>
void Trainer<Act, Acc>::resume() {
  const std::string& root = config_.checkpoint.dir;
  const std::string fs_mode(to_string(config_.checkpoint.fs_mode));
  std::optional<int64_t> step;
  if (config_.checkpoint.resume == ResumeMode::kAuto) {
    std::vector<int64_t> intact;
    int64_t folders = 0;
    if (is_writer_) {
      folders = int64_t(step_folders(root).size());
      // On stderr, where the error below refers to them.
      intact = list_intact_steps(root, [&](const std::string& message) {
        std::cerr << ctx_.rank_name(ctx_.world_rank()) << ": " << message << "\n";
      });
    }
    step = mpi::agree_resume_step(ctx_, fs_mode, intact);
    // Checkpoints that are all corrupt are not "no checkpoint": starting over
    // would throw the run away and write over them.
    const int64_t broken =
        mpi::allreduce_max(ctx_, folders - int64_t(intact.size()), "checkpoint check");
    if (!step && broken > 0) {
      std::ostringstream message;
      message << "no checkpoint in " << root << " can be resumed: " << broken
              << " step folder(s) are not intact (each is reported above), and starting over "
                 "would write over them. Repair or move them, or start over on purpose with "
                 "--checkpoint.resume=never";
      throw mpi::CollectiveError(ExitCode::kCheckpoint, message.str());
    }
  }
  if (!step) {
    // resume = never passes over what is there, and says so.
    const std::vector<int64_t> old =
        config_.checkpoint.resume == ResumeMode::kNever && ctx_.is_main() ? step_folders(root)
                                                                          : std::vector<int64_t>{};
    if (old.empty()) {
      log_ << "starting from scratch (no checkpoint in " << root << ")\n";
    } else {
      log_ << "starting from scratch (checkpoint.resume = never); the " << old.size()
           << " step folders in " << root << " (steps " << old.front() << " to " << old.back()
           << ") are not resumed, and this run's checkpoints replace them: a step it writes "
              "overwrites the old one, and retention (checkpoint.keep_last) removes those it "
              "does not keep\n";
    }
    state_.epoch = 0;
    state_.batches_in_epoch = int64_t(sampler_->batches_per_epoch(0));
    return;
  }
  const std::string dir = checkpoint_dir(root, *step);
  CheckpointFiles files = read_checkpoint(root, *step);
  const int64_t total_steps = state_.total_steps;
  state_ = TrainingState::from_json(files.state, dir + "/state.json");
  state_.total_steps = total_steps;
  model_->params().import_masters(
      tensors_from_safetensors(files.files[kModelFile], dir + "/" + kModelFile),
      dir + "/" + kModelFile);
  optimizer_->import_state(
      tensors_from_safetensors(files.files[kOptimizerFile], dir + "/" + kOptimizerFile),
      dir + "/" + kOptimizerFile);
  scaler_->load_state(state_.scaler);
  optimizer_->set_state(int(state_.optimizer_step), scaler_->loss_scaler_state());

  Config checkpoint_config;
  apply_yaml(checkpoint_config, files.files[kConfigFile], dir + "/" + kConfigFile);
  for (const std::string& change : config_differences(checkpoint_config, config_)) {
    log_ << "note: config differs from the checkpoint's: " << change << "\n";
  }
  if (state_.train_manifest_hash != train_hash_) {
    log_ << "note: the train manifest differs from the checkpoint's; epochs resume by position\n";
  }
  if (state_.world_size != ctx_.world_size()) {
    // Position by the share of the epoch done, since the batches per rank change.
    const double done = double(state_.batch_in_epoch) / double(state_.batches_in_epoch);
    log_ << "note: the checkpoint was written by " << state_.world_size << " ranks, this run has "
         << ctx_.world_size() << "; the epoch resumes at the same fraction, not bit-exactly\n";
    state_.batches_in_epoch = int64_t(sampler_->batches_per_epoch(state_.epoch));
    state_.batch_in_epoch = std::llround(done * double(state_.batches_in_epoch));
  } else if (state_.threads != threads_) {
    log_ << "note: the checkpoint was trained with " << state_.threads << " threads per rank, "
         << "this run uses " << threads_ << "; sums may round differently\n";
  }
  state_.batches_in_epoch = int64_t(sampler_->batches_per_epoch(state_.epoch));
  if (state_.batch_in_epoch >= state_.batches_in_epoch) {  // a changed world size ended the epoch
    ++state_.epoch;
    state_.batch_in_epoch = 0;
    state_.batches_in_epoch = int64_t(sampler_->batches_per_epoch(state_.epoch));
  }
  step_at_clear_ = state_.step;
  log_ << "resumed from " << dir << ": step " << state_.step << ", epoch " << std::fixed
       << std::setprecision(2) << epoch_progress() << std::defaultfloat << "\n";
}

template <typename Act, typename Acc>
TrainResult Trainer<Act, Acc>::run(const TrainOptions& options) {
  run_begin_ = Clock::now();
  ctx_.set_timeout(config_.distributed.timeout_s);
  is_writer_ = mpi::is_checkpoint_writer(ctx_, std::string(to_string(config_.checkpoint.fs_mode)));
  load_data();
  build_model();
  resume();
  // The ranks agree on the time already spent (per-node checkpoints hold each node's clock).
  seconds_before_ =
      double(mpi::allreduce_max(ctx_, std::llround(state_.train_seconds * 1e3), "train time")) /
      1e3;

  state_.seed = config_.training.seed;
  state_.world_size = ctx_.world_size();
  state_.accumulation = config_.training.accumulation;
  state_.threads = threads_;
  state_.config_hash = hash_hex(config_hash(config_));
  state_.train_manifest_hash = train_hash_;
  state_.valid_manifest_hash = valid_hash_;
  state_.tokenizer_file = tokenizer_file_name(config_.tokenizer);
  state_.cmvn_file = config_.features.cmvn == CmvnMode::kGlobal ? kCmvnFile : "";

  metrics_ = std::make_unique<MetricsLog>(config_.output.metrics_file, ctx_.is_main(), state_.step);
  if (config_.output.batch_log) {
    char name[32];
    std::snprintf(name, sizeof name, "rank-%05d.jsonl", ctx_.world_rank());
    batch_log_ =
        std::make_unique<MetricsLog>(config_.output.dir + "/batches/" + name, true, state_.step);
  }
  TrainResult result;
  start_step_ = state_.step;
  start_time_ = Clock::now();
  if (state_.step >= state_.total_steps) {
    log_ << "nothing to train: the checkpoint is at step " << state_.step << " and the schedule "
         << "has " << state_.total_steps << " steps (raise training.max_steps or "
         << "training.epochs to train on)\n";
    result.step = state_.step;
    result.finished = true;
    return result;
  }
  if (has_time_budget() && state_.step > 0 && time_left() <= 0) {
    log_ << "nothing to train: the checkpoint at step " << state_.step << " has trained for "
         << format_duration(seconds_before_) << ", training.max_minutes is "
         << config_.training.max_minutes << " (raise it to train on)\n";
    result.step = state_.step;
    result.finished = true;
    return result;
  }
  if (options.stop_at_step == state_.step) {
    save_checkpoint();
    log_ << "stopped at step " << state_.step << "; run the same command again to resume\n";
    result.step = state_.step;
    return result;
  }
  while (state_.step < state_.total_steps) {
    const int epoch_before = state_.epoch;
    const bool stop = train_step();
    const bool last = state_.step == state_.total_steps || time_spent_;
    const int64_t step = state_.step;
    const TrainingConfig& t = config_.training;
    const bool log_now = step % t.log_every == 0 || last || stop;
    const int64_t valid_every = config_.validation.every_steps;
    const bool epoch_ended = state_.epoch != epoch_before;
    const bool validate_now =
        valid_loader_ && ((valid_every > 0 && step % valid_every == 0) || epoch_ended || last);
    // checkpoint.every_steps = 0: the last step's checkpoint only (the end, a
    // stop), none by step count and none at an improved validation.
    const int64_t checkpoint_every = config_.checkpoint.every_steps;
    const bool stopping = stop || step == options.stop_at_step;
    const bool checkpoint_due =
        (checkpoint_every > 0 && step % checkpoint_every == 0) || last || stopping;
    // The only waits for the device: here, and in validation.
    if (log_now || validate_now || checkpoint_due) read_step_state();
    if (log_now) log_progress();
    const bool improved = validate_now && validate();
    if (checkpoint_due || (improved && checkpoint_every > 0)) {
      double gone = launcher_gone();
      mpi::allreduce_sum_inplace(ctx_, &gone, 1, "launcher check");
      if (gone > 0) stop_without_launcher("before the checkpoint of step " + std::to_string(step));
      save_checkpoint();
    }
    if (stopping) {
      result.stop_signal = stop ? StopSignals::received() : 0;
      log_ << "stopped after step " << step << "; run the same command again to resume\n";
      break;
    }
    if (time_spent_) {
      log_ << "training.max_minutes = " << config_.training.max_minutes << " spent after step "
           << step << "\n";
      break;
    }
  }
  result.step = state_.step;
  result.finished = state_.step >= state_.total_steps || time_spent_;
  if (config_.training.cuda_graphs) {
    const StepGraphCounts graphs = backend_.step_graph_counts();
    log_ << "step graphs: " << graphs.captures << " captured, " << graphs.replays << " replayed\n";
  }
  if (result.finished) {
    log_ << "training done: " << state_.step << " steps in "
         << format_duration(std::chrono::duration<double>(Clock::now() - start_time_).count())
         << " (" << format_duration(train_seconds()) << " in all runs)";
    if (state_.best_step > 0) {
      const std::string best_dir = checkpoint_dir(config_.checkpoint.dir, state_.best_step);
      log_ << "; best validation CER " << trainer_detail::percent(state_.best_cer) << " at step "
           << state_.best_step
           << (std::filesystem::is_directory(best_dir) ? " (" + best_dir + ")"
                                                       : " (no checkpoint of it kept)");
    }
    log_ << "\n";
  }
  return result;
}

template <typename Act, typename Acc>
bool Trainer<Act, Acc>::train_step() {
  const Clock::time_point begin = Clock::now();
  if (loader_epoch_ != state_.epoch) {
    train_loader_->start_epoch(state_.epoch, sampler_->epoch_batches(state_.epoch),
                               size_t(state_.batch_in_epoch));
    loader_epoch_ = state_.epoch;
  }
  ctx_.set_step(state_.step + 1);
  const int micro = int(std::min<int64_t>(config_.training.accumulation,
                                          state_.batches_in_epoch - state_.batch_in_epoch));
  // Tokens, stop requests, ranks that found the time budget spent, ranks
  // whose launcher is gone.
  double counts[4] = {0, StopSignals::received() ? 1.0 : 0.0,
                      has_time_budget() && time_left() <= 0 ? 1.0 : 0.0, launcher_gone()};
  for (int i = 0; i < micro; ++i) {
    Batch& batch = micro_batches_[size_t(i)];
    MPIASR_CHECK(train_loader_->next(batch), "the loader ended epoch "
                                                 << state_.epoch << " at batch "
                                                 << state_.batch_in_epoch + i);
    for (int b = 0; b < batch.batch_size; ++b) counts[0] += batch.target_lengths[size_t(b)];
    if (batch_log_) batch_log_->write(batch_record(batch, state_.step + 1, i));
  }
  mpi::allreduce_sum_inplace(ctx_, counts, 4, "step token count");
  if (counts[3] > 0) stop_without_launcher("before step " + std::to_string(state_.step + 1));
  const Clock::time_point compute_begin = Clock::now();
  time_spent_ = counts[2] > 0;
  const double loss_divisor = std::max(counts[0], 1.0);

  optimizer_->zero_grad();
  // The learning rate follows the steps taken, as a scheduler stepped every
  // iteration does (fp16 steps skipped on the device do not hold it back).
  state_.lr = schedule_->lr_at(int(state_.step + 1));
  // The gradient is the loss scale times that of the summed loss; the token
  // count is divided in when it is unscaled, with the scale (the control).
  optimizer_->set_step_inputs(loss_divisor, float(state_.lr));
  StepControl* control = optimizer_->control();
  const bool diagnose = state_.step < config_.output.diagnostic_steps;
  BlankStatistics blanks;
  for (int i = 0; i < micro; ++i) {
    const Batch& batch = micro_batches_[size_t(i)];
    const bool last = i == micro - 1;
    std::function<void(size_t, size_t)> on_grads_ready;
    if (last && reducer_) {
      reducer_->begin_step();
      on_grads_ready = [this](size_t offset, size_t count) {
        reducer_->on_grads_ready(offset, count);
      };
    }
    const auto queue = [&] {
      model_->forward_backward(
          model_input(batch), 1.0, &control->scaler.scale, config_.training.zero_infinity,
          trainer_detail::dropout_seed(config_.training.seed, state_.step, ctx_.world_rank(), i),
          &control->loss_sum, on_grads_ready);
    };
    // A step graph cannot start the all-reduce from inside backward.
    if (config_.training.cuda_graphs && !on_grads_ready) {
      backend_.queue_as_graph(queue);
    } else {
      queue();
    }
    if (diagnose) model_->add_blank_statistics(blanks);
    for (int b = 0; b < batch.batch_size; ++b) interval_.tokens += batch.target_lengths[size_t(b)];
    interval_.utterances += batch.batch_size;
    interval_.audio_seconds += batch.audio_seconds;
  }
  const Clock::time_point backward_end = Clock::now();
  if (reducer_) {
    reducer_->finish();
    interval_.step_comm_waits.push_back(
        std::chrono::duration<double>(Clock::now() - backward_end).count());
    interval_.comm_cpu += reducer_->last_comm_cpu_seconds();
  }
  const Clock::time_point wait_end = Clock::now();
  if (diagnose) write_diagnostics(blanks, loss_divisor);

  // Norm, loss-scaler and clip decisions and AdamW, all where the gradients
  // are (kernels/step_control.h); sharded, each rank updates its pieces and
  // the weights are gathered.
  optimizer_->add_grad_sum_squares();
  if (sharded_) reducer_->sum_over_ranks(&control->grad_sum_squares);
  optimizer_->decide(scaler_->rule());
  optimizer_->step();
  if (sharded_) {
    reducer_->gather_parameters(model_->params().master());
    model_->params().refresh_compute();
  }

  ++state_.step;
  ++interval_.steps;
  state_.batch_in_epoch += micro;
  if (state_.batch_in_epoch >= state_.batches_in_epoch) {
    ++state_.epoch;
    state_.batch_in_epoch = 0;
    state_.batches_in_epoch = int64_t(sampler_->batches_per_epoch(state_.epoch));
  }
  interval_.seconds += std::chrono::duration<double>(Clock::now() - begin).count();
  if (config_.output.timeline) record_timeline(begin, compute_begin, backward_end, wait_end);
  return counts[1] > 0;
}

namespace trainer_detail {

// One rank's step in interval_.timeline: these fields, then each bucket's
// bytes and these times (all times in ms from the step's start).
constexpr const char* kStepTimes[] = {"step_ms", "data_ms", "forward_backward_ms", "comm_wait_ms",
                                      "optimizer_ms"};
constexpr const char* kBucketTimes[] = {"ready_ms", "start_ms", "end_ms"};

}  // namespace trainer_detail

template <typename Act, typename Acc>
void Trainer<Act, Acc>::record_timeline(Clock::time_point begin, Clock::time_point compute_begin,
                                        Clock::time_point backward_end,
                                        Clock::time_point wait_end) {
  const auto ms = [begin](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(t - begin).count();
  };
  const Clock::time_point end = Clock::now();
  std::vector<double>& out = interval_.timeline;
  for (double value : {ms(end), ms(compute_begin), ms(backward_end) - ms(compute_begin),
                       ms(wait_end) - ms(backward_end), ms(end) - ms(wait_end)}) {
    out.push_back(value);
  }
  if (!reducer_) return;
  for (const mpi::BucketTimes& bucket : reducer_->last_timeline()) {
    for (double value :
         {double(bucket.bytes), ms(bucket.ready), ms(bucket.start), ms(bucket.end)}) {
      out.push_back(value);
    }
  }
}

template <typename Act, typename Acc>
void Trainer<Act, Acc>::write_timelines() {
  using trainer_detail::kBucketTimes;
  using trainer_detail::kStepTimes;
  const std::vector<double> all =
      mpi::gather_to_receivers(ctx_, interval_.timeline, ctx_.is_main(), "timeline gather");
  if (!ctx_.is_main()) return;
  const size_t steps = size_t(interval_.steps);
  const size_t per_step = interval_.timeline.size() / std::max<size_t>(steps, 1);
  const size_t buckets = (per_step - std::size(kStepTimes)) / (1 + std::size(kBucketTimes));
  for (size_t s = 0; s < steps; ++s) {
    nlohmann::json ranks = nlohmann::json::array();
    for (int rank = 0; rank < ctx_.world_size(); ++rank) {
      const double* values = all.data() + size_t(rank) * interval_.timeline.size() + s * per_step;
      nlohmann::json times = {{"rank", rank}};
      for (const char* name : kStepTimes) times[name] = *values++;
      times["bucket_bytes"] = nlohmann::json::array();
      for (const char* name : kBucketTimes) times[name] = nlohmann::json::array();
      for (size_t b = 0; b < buckets; ++b) {
        times["bucket_bytes"].push_back(int64_t(*values++));
        for (const char* name : kBucketTimes) times[name].push_back(*values++);
      }
      ranks.push_back(std::move(times));
    }
    metrics_->write({{"kind", "timeline"},
                     {"step", state_.step - interval_.steps + int64_t(s) + 1},
                     {"ranks", std::move(ranks)}});
  }
}

template <typename Act, typename Acc>
void Trainer<Act, Acc>::write_diagnostics(BlankStatistics blanks, double loss_divisor) {
  double sums[] = {blanks.frames, blanks.posterior, blanks.argmax};
  mpi::allreduce_sum_inplace(ctx_, sums, int(std::size(sums)), "diagnostics blank totals");
  if (!ctx_.is_main()) return;
  // The gradient of the token-averaged loss, before clipping.
  const double scale = optimizer_->read_control().scaler.scale;
  const double unscale = 1.0 / (scale * loss_divisor);
  ParameterStore<Act, Acc>& params = model_->params();
  std::vector<Acc> grad(params.size());
  backend_.to_host(grad.data(), params.grad(), grad.size() * sizeof(Acc));
  nlohmann::json norms = nlohmann::json::object();
  double total = 0;
  for (const ParameterGroup& group : model_->parameter_groups()) {
    const auto [offset, count] = params.range(group.first, group.last);
    double squares = 0;
    for (size_t i = offset; i < offset + count; ++i) squares += double(grad[i]) * double(grad[i]);
    total += squares;
    norms[group.name] = std::sqrt(squares) * unscale;
  }
  const size_t blank_bias = params.info(params.index_of("ctc_head.bias")).offset;
  Acc bias;
  backend_.to_host(&bias, params.master() + blank_bias, sizeof bias);
  const double frames = std::max(sums[0], 1.0);
  metrics_->write({{"kind", "diagnostics"},
                   {"step", state_.step + 1},
                   {"lr", float(state_.lr)},
                   {"frames", sums[0]},
                   {"blank_posterior", sums[1] / frames},
                   {"blank_argmax", sums[2] / frames},
                   {"blank_bias", double(bias)},
                   {"blank_bias_grad", double(grad[blank_bias]) * unscale},
                   {"grad_norm", std::sqrt(total) * unscale},
                   {"grad_norms", std::move(norms)}});
}

template <typename Act, typename Acc>
nlohmann::json Trainer<Act, Acc>::batch_record(const Batch& batch, int64_t step, int micro) const {
  nlohmann::json utterances = nlohmann::json::array();
  const int32_t* targets = batch.targets.data();
  for (int b = 0; b < batch.batch_size; ++b) {
    const Utterance& u = train_.utterances[batch.utterance_indices[size_t(b)]];
    const int length = batch.target_lengths[size_t(b)];
    utterances.push_back({{"line", u.line},
                          {"audio", u.audio_path},
                          {"offset", u.offset},
                          {"duration", u.duration},
                          {"frames", batch.frame_lengths[size_t(b)]},
                          {"targets", std::vector<int32_t>(targets, targets + length)}});
    targets += length;
  }
  return {{"step", step},
          {"rank", ctx_.world_rank()},
          {"micro_batch", micro},
          {"manifest", train_.path},
          {"utterances", std::move(utterances)}};
}

template <typename Act, typename Acc>
void Trainer<Act, Acc>::read_step_state() {
  const StepControl control = optimizer_->read_control();
  if (control.diverged > 0) {
    MPIASR_FAIL(ExitCode::kNonFinite, "step "
                                          << step_at_clear_ + control.first_diverged
                                          << ": the gradient norm is " << control.diverged_norm
                                          << "; training diverged (lower optimizer.lr, raise "
                                             "schedule.warmup_steps or set optimizer.clip_norm)");
  }
  scaler_->set_loss_scaler_state(control.scaler);
  if (control.stuck_step > 0) {
    MPIASR_FAIL(ExitCode::kNonFinite,
                "step " << step_at_clear_ + control.stuck_step << ": the last "
                        << config_.precision.max_skips_at_min_scale
                        << " steps were all skipped, their gradients not finite even at the "
                           "minimum loss scale "
                        << scaler_->config().min_scale
                        << ": training diverged (precision.max_skips_at_min_scale = "
                        << config_.precision.max_skips_at_min_scale
                        << " such steps stop it; lower optimizer.lr or raise "
                           "schedule.warmup_steps)");
  }
  state_.scaler = scaler_->state();
  state_.optimizer_step = control.optimizer_step;
  // The sums run from one progress line to the next (cleared there).
  interval_.loss = control.loss_sum;
  interval_.grad_norm = control.grad_norm_sum;
  interval_.skipped = control.skipped;
}

template <typename Act, typename Acc>
void Trainer<Act, Acc>::log_progress() {
  const double loader_cpu = train_loader_->worker_cpu_seconds();
  double sums[] = {
      interval_.loss,
      interval_.tokens,
      interval_.utterances,
      interval_.audio_seconds,
      std::accumulate(interval_.step_comm_waits.begin(), interval_.step_comm_waits.end(), 0.0),
      interval_.comm_cpu,
      loader_cpu - loader_cpu_before_};
  loader_cpu_before_ = loader_cpu;
  mpi::allreduce_sum_inplace(ctx_, sums, int(std::size(sums)), "progress totals");
  // Step time is the slowest rank's, which is what the run waits for.
  const double seconds =
      double(mpi::allreduce_max(ctx_, int64_t(interval_.seconds * 1e6), "progress time")) / 1e6;
  const double loss = sums[1] > 0 ? sums[0] / sums[1] : 0.0;
  const double grad_norm = interval_.grad_norm / double(std::max<int64_t>(interval_.steps, 1));
  const double utt_per_s = sums[2] / std::max(seconds, 1e-9);
  const double audio_per_s = sums[3] / std::max(seconds, 1e-9);
  // Means over ranks and steps: the time finish() blocked (the all-reduce not
  // hidden by backward), the communication thread's and the loader's CPU time.
  const double per_rank_step =
      1e3 / double(ctx_.world_size() * std::max<int64_t>(interval_.steps, 1));
  const double comm_wait_ms = sums[4] * per_rank_step;
  const double comm_cpu_ms = sums[5] * per_rank_step;
  const double loader_cpu_ms = sums[6] * per_rank_step;
  // The all-reduce exposed after the last rank's backward: in each step the
  // least any rank waited, which is the wait of the rank that finished
  // backward last, as it waited for no other rank (the rest of comm wait is
  // waiting for that rank).
  double comm_exposed_ms = 0;
  if (reducer_) {
    std::vector<double>& waits = interval_.step_comm_waits;
    mpi::allreduce_min_inplace(ctx_, waits.data(), int(waits.size()), "progress exposed wait");
    for (double wait : waits) comm_exposed_ms += 1e3 * wait;
    comm_exposed_ms /= double(std::max<size_t>(waits.size(), 1));
  }
  if (config_.output.timeline) write_timelines();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_time_).count();
  double eta =
      elapsed / double(state_.step - start_step_) * double(state_.total_steps - state_.step);
  if (has_time_budget()) eta = std::max(0.0, std::min(eta, time_left()));
  if (ctx_.is_main()) {
    char line[256];
    std::snprintf(line, sizeof line,
                  "step %lld/%lld  epoch %.2f  loss %.4f  lr %.3e  grad_norm %.3f  "
                  "%.1f utt/s  %.1f audio-s/s  elapsed %s  ETA %s",
                  static_cast<long long>(state_.step), static_cast<long long>(state_.total_steps),
                  epoch_progress(), loss, state_.lr, grad_norm, utt_per_s, audio_per_s,
                  format_duration(elapsed).c_str(), format_duration(eta).c_str());
    log_ << line;
    if (reducer_) {
      log_ << "  comm wait " << std::fixed << std::setprecision(1) << comm_wait_ms
           << " ms/step (exposed " << comm_exposed_ms << ")" << std::defaultfloat;
    }
    log_ << std::endl;
    if (interval_.skipped > 0) {
      log_ << "steps " << state_.step - interval_.steps + 1 << "-" << state_.step << ": "
           << interval_.skipped << " skipped for non-finite gradients, loss scale now "
           << scaler_->scale() << "\n";
    }
  }
  nlohmann::json record = {
      {"kind", "train"},
      {"step", state_.step},
      {"epoch", epoch_progress()},
      {"loss", loss},
      {"lr", state_.lr},
      {"grad_norm", grad_norm},
      {"utt_per_s", utt_per_s},
      {"audio_s_per_s", audio_per_s},
      {"step_ms", 1e3 * seconds / double(std::max<int64_t>(interval_.steps, 1))},
  };
  if (reducer_) {
    record["comm_wait_ms"] = comm_wait_ms;
    record["comm_exposed_ms"] = comm_exposed_ms;
    record["comm_cpu_ms"] = comm_cpu_ms;
  }
  record["loader_cpu_ms"] = loader_cpu_ms;
  record["elapsed_s"] = train_seconds();
  metrics_->write(record);
  interval_ = Interval{};
  optimizer_->clear_sums();
  step_at_clear_ = state_.step;
}

template <typename Act, typename Acc>
bool Trainer<Act, Acc>::validate() {
  const Clock::time_point begin = Clock::now();
  EvaluationTotals totals =
      evaluate(*model_, *valid_loader_, valid_batches_, valid_, *tokenizer_, windowing_, nullptr);
  allreduce_totals(ctx_, totals);
  const double cer = totals.errors.cer(), wer = totals.errors.wer();
  const bool improved = cer < state_.best_cer;
  if (improved) {
    state_.best_cer = cer;
    state_.best_step = state_.step;
  }
  log_ << "valid step " << state_.step << ": loss " << std::fixed << std::setprecision(4)
       << totals.loss_per_token() << "  CER " << trainer_detail::percent(cer) << "  WER "
       << trainer_detail::percent(wer) << "  (" << int64_t(totals.utterances) << " utterances, "
       << std::setprecision(1) << std::chrono::duration<double>(Clock::now() - begin).count()
       << " s" << (improved ? ", best so far" : "") << ")" << std::defaultfloat << std::endl;
  if (totals.infeasible > 0) {
    log_ << "valid: " << int64_t(totals.infeasible)
         << " utterances are too short for their transcript and left out of the loss\n";
  }
  metrics_->write({{"kind", "valid"},
                   {"step", state_.step},
                   {"loss", totals.loss_per_token()},
                   {"cer", cer},
                   {"wer", wer},
                   {"elapsed_s", train_seconds()}});
  return improved;
}

template <typename Act, typename Acc>
NamedTensors Trainer<Act, Acc>::optimizer_state_for_writers() {
  if (!sharded_) return is_writer_ ? optimizer_->export_state() : NamedTensors{};
  // DESIGN.md "Sharded optimizer state": gathered on save, so a checkpoint is
  // the same whatever the sharding, and any world size resumes from it.
  const size_t n = optimizer_->state_elements();
  const std::vector<float> all =
      mpi::gather_to_receivers(ctx_, optimizer_->moments_to_host(), is_writer_, "optimizer gather");
  if (!is_writer_) return {};
  const size_t size = model_->params().size();
  std::vector<float> m(size, 0.0f), v(size, 0.0f);
  for (int rank = 0; rank < ctx_.world_size(); ++rank) {
    const float* moments = all.data() + size_t(rank) * 2 * n;
    for (const OptimizerRange& range : reducer_->shard_ranges(rank)) {
      std::copy_n(moments + range.state_offset, range.count, m.begin() + long(range.offset));
      std::copy_n(moments + n + range.state_offset, range.count, v.begin() + long(range.offset));
    }
  }
  return optimizer_->state_tensors(m, v);
}

template <typename Act, typename Acc>
void Trainer<Act, Acc>::save_checkpoint() {
  const Clock::time_point begin = Clock::now();
  std::string dir, failure;
  state_.train_seconds = train_seconds();
  const NamedTensors optimizer_state = optimizer_state_for_writers();
  if (is_writer_) {
    try {
      const CheckpointFiles files = make_checkpoint_files(
          model_->params().export_masters(), optimizer_state, state_, dump_config(config_),
          config_.tokenizer.model_path, config_.features.cmvn_path, model_->config());
      // The best step, when it has a checkpoint (with checkpoint.every_steps
      // = 0 an improved validation writes none); otherwise the best pointer
      // stands as it is.
      const bool best_kept =
          state_.best_step > 0 &&
          (state_.best_step == state_.step ||
           std::filesystem::is_directory(checkpoint_dir(config_.checkpoint.dir, state_.best_step)));
      const std::optional<int64_t> best =
          best_kept ? std::optional<int64_t>(state_.best_step) : std::nullopt;
      dir = write_checkpoint(config_.checkpoint.dir, state_.step, files,
                             config_.checkpoint.keep_last, best);
    } catch (const Error& error) {
      failure = error.what();
    }
  }
  const int failed_rank = mpi::first_failing_rank(ctx_, !failure.empty(), "checkpoint write");
  if (!failure.empty()) throw Error(ExitCode::kCheckpoint, failure);
  if (failed_rank >= 0) {
    MPIASR_FAIL(ExitCode::kCheckpoint, "the checkpoint of step " << state_.step << " failed on "
                                                                 << ctx_.rank_name(failed_rank));
  }
  log_ << "checkpoint: "
       << (dir.empty() ? checkpoint_dir(config_.checkpoint.dir, state_.step) : dir) << " ("
       << std::fixed << std::setprecision(1)
       << std::chrono::duration<double>(Clock::now() - begin).count() << " s)" << std::defaultfloat
       << std::endl;
}

}  // namespace mpiasr
