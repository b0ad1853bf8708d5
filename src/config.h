// The training configuration: a plain struct of sections with defaults,
// loaded from a YAML file and `--section.key=value` command-line overrides.
//
//   Config config = load_config("cfg.yaml", {"--optimizer.lr=1e-3"});
//   config.optimizer.lr;  config.schedule.type == ScheduleType::kNoam;
//
// Every key is "section.key". One table in config.cpp maps each key to its
// field (parsing, dumping, listing); adding a key is a field here plus one
// line there. Unknown keys and wrong types are errors (ExitCode::kUsage)
// naming the file and line, the value, and the nearest valid key:
//   unknown key 'optimzer.lr' in cfg.yaml:12; did you mean 'optimizer.lr'?
// The resolved config dumps to canonical YAML (every key, table order), which
// is saved with each checkpoint, and its FNV-1a 64 hash is what ranks compare.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/lr_schedule.h"  // LrScaling, shared with the schedule itself

namespace mpiasr {

// The most threads any option may ask for per rank (training.threads, eval's
// and transcribe's --threads); a rank may not ask for more than the cores it
// may run on either (mpi::Context::compute_threads).
inline constexpr int kMaxThreads = 4096;

enum class ManifestFormat { kAuto, kTsv, kJsonl, kCsv };  // auto: by the file's extension
enum class BatchMode { kDynamic, kFixed };
enum class WindowType { kHann, kPovey, kHamming };
enum class CmvnMode { kGlobal, kUtterance, kNone };
enum class TokenizerType { kChar, kBpe, kUnigram };
enum class ModelPreset { kTiny, kSmall, kMedium, kLarge };
enum class ScheduleType { kNoam, kCosine, kConstant };
// auto: on CUDA bf16-mixed where every rank's GPU runs bf16 natively (compute
// capability 8.0 and later), fp16-mixed otherwise; fp32 on the CPU.
enum class Precision { kAuto, kFp32, kFp16Mixed, kBf16Mixed };
enum class DeviceType { kAuto, kCpu, kCuda };  // auto: CUDA when a GPU is visible
enum class FsMode { kShared, kPerNode };
enum class AllreduceDtype { kFp32, kBf16, kFp16 };
enum class ResumeMode { kAuto, kNever };

// The names of an enum's values as written in YAML, indexed by the value.
std::span<const char* const> enum_names(ManifestFormat);
std::span<const char* const> enum_names(BatchMode);
std::span<const char* const> enum_names(WindowType);
std::span<const char* const> enum_names(CmvnMode);
std::span<const char* const> enum_names(TokenizerType);
std::span<const char* const> enum_names(ModelPreset);
std::span<const char* const> enum_names(ScheduleType);
std::span<const char* const> enum_names(LrScaling);
std::span<const char* const> enum_names(Precision);
std::span<const char* const> enum_names(DeviceType);
std::span<const char* const> enum_names(FsMode);
std::span<const char* const> enum_names(AllreduceDtype);
std::span<const char* const> enum_names(ResumeMode);

template <typename Enum>
std::string_view to_string(Enum value) {
  return enum_names(value)[static_cast<size_t>(value)];
}

struct DataConfig {
  std::string train_manifest;
  std::string valid_manifest;
  std::string test_manifest;
  ManifestFormat manifest_format = ManifestFormat::kAuto;
  std::string data_root;  // substituted for $data_root in manifest audio paths
  bool skip_bad = false;  // skip (and report) unreadable or invalid utterances instead of failing
  double max_utterance_seconds = 30;  // longer utterances are dropped; 0 = no limit
  // Training audio played at one of speed_factors, drawn per utterance and
  // epoch (io/speed_perturb.h); batches are planned on the unperturbed
  // durations, so a batch may hold up to 1 / min(factor) times its budget.
  bool speed_perturb = false;
  std::vector<double> speed_factors = {0.9, 1.0, 1.1};

  bool operator==(const DataConfig&) const = default;
};

struct BatchingConfig {
  BatchMode mode = BatchMode::kDynamic;
  double max_batch_seconds = 200;  // dynamic: per-rank budget, B x longest utterance
  int max_batch_utterances = 64;   // dynamic: cap on B
  int batch_size = 16;             // fixed: B per rank
  int num_buckets = 20;            // duration buckets (quantiles)
  bool drop_last = false;          // trim the batch list to a multiple of the world size
  // Each step's batches (ranks x accumulation of them) alike in padded
  // seconds, so ranks reach the all-reduce together (io/sampler.h, step 3).
  bool balance_steps = true;
  // The first this many epochs take their batches shortest first, unshuffled
  // (SortaGrad; io/sampler.h, step 3).
  int shortest_first_epochs = 0;
  int workers = 2;      // loader threads per rank
  int queue_depth = 4;  // batches prepared ahead
  // Training batches are padded to a multiple of this many frames, so that
  // their shapes fall in few buckets (step graphs, training.cuda_graphs).
  int frame_multiple = 1;

  bool operator==(const BatchingConfig&) const = default;
};

struct FeaturesConfig {
  int sample_rate = 16000;
  int n_mels = 80;
  WindowType window = WindowType::kHann;
  double preemphasis = 0;
  double dither = 0;
  bool kaldi = false;  // Kaldi compute-fbank compatible options (povey window, snip edges, ...)
  CmvnMode cmvn = CmvnMode::kGlobal;
  std::string cmvn_path;  // global statistics; resolved default: <output.dir>/cmvn.json

  bool operator==(const FeaturesConfig&) const = default;
};

struct SpecAugmentConfig {
  bool enabled = true;
  int freq_masks = 2;
  int freq_width = 27;  // max mel bins per frequency mask
  int time_masks = 10;
  double time_width_ratio = 0.05;  // max frames per time mask, as a fraction of the length

  bool operator==(const SpecAugmentConfig&) const = default;
};

struct TokenizerConfig {
  TokenizerType type = TokenizerType::kChar;
  int vocab_size = 256;    // bpe/unigram pieces; char: taken from the data
  std::string model_path;  // resolved default: <output.dir>/tokenizer.model (.txt for char)
  bool lowercase = true;
  bool strip_punctuation = true;

  bool operator==(const TokenizerConfig&) const = default;
};

// The preset's ConformerConfig with any of these set fields replacing its own.
struct ModelConfig {
  ModelPreset preset = ModelPreset::kSmall;
  std::optional<int> d_model;
  std::optional<int> n_layers;
  std::optional<int> n_heads;
  std::optional<int> ff_mult;
  std::optional<int> conv_kernel;
  std::optional<int> subsampling_channels;
  std::optional<double> dropout;
  // The CTC head's biases start at the log of each output's share of the
  // training set's output frames (src/output_prior.h), the blank's the share
  // its tokens leave, instead of PyTorch's uniform draw; the weights are
  // drawn as ever. Resuming takes the checkpoint's biases.
  bool prior_bias = false;

  bool operator==(const ModelConfig&) const = default;
};

struct OptimizerConfig {  // AdamW
  double lr = 1e-3;       // peak learning rate (cosine, constant)
  double beta1 = 0.9;
  double beta2 = 0.98;
  double eps = 1e-9;
  double weight_decay = 1e-3;
  double clip_norm = 5.0;  // global gradient norm; 0 = no clipping

  bool operator==(const OptimizerConfig&) const = default;
};

// noam:     lr(t) = noam_factor * d_model^-0.5 * min(t^-0.5, t * warmup_steps^-1.5)
// cosine:   linear warmup to optimizer.lr, then cosine decay to min_lr at the last step
// constant: linear warmup to optimizer.lr, then constant
// lr_scaling multiplies the result by k (linear) or sqrt(k) (sqrt), where
// k = world size x accumulation / reference_batch.
struct ScheduleConfig {
  ScheduleType type = ScheduleType::kNoam;
  int64_t warmup_steps = 10000;
  double noam_factor = 2.0;
  double min_lr = 1e-5;
  LrScaling lr_scaling = LrScaling::kNone;
  int reference_batch = 1;  // ranks x accumulation that the learning rate was tuned for

  bool operator==(const ScheduleConfig&) const = default;
};

// Dynamic loss scaling as GradScaler does it (fp16-mixed only).
struct PrecisionConfig {
  Precision mode = Precision::kAuto;
  double init_scale = 65536;
  int growth_interval = 2000;  // finite steps before the scale doubles
  // Steps in a row skipped for non-finite gradients at the minimum scale (1)
  // after which training stops as diverged (exit code 6).
  int max_skips_at_min_scale = 20;

  bool operator==(const PrecisionConfig&) const = default;
};

struct TrainingConfig {
  DeviceType device = DeviceType::kAuto;
  int epochs = 10;
  int64_t max_steps = 0;  // 0 = no limit
  // Wall-clock budget of the whole training, resumed runs included: the
  // first step to end past it is the last (validated and checkpointed). 0 = none.
  double max_minutes = 0;
  int accumulation = 1;  // micro-batches per optimizer step
  uint64_t seed = 1234;
  int threads = 0;            // CPU threads per rank; 0 = cores of the node / ranks on the node
  bool zero_infinity = true;  // CTC: zero the loss of impossible alignments
  int log_every = 50;         // steps between progress lines
  // GPU memory (MiB) left free beside the CUDA backend's arena, which takes
  // the rest, for the CUDA context, NCCL's buffers and cuBLAS.
  double gpu_reserve_mb = 3072;
  // CUDA: each micro-batch's forward and backward replayed as a CUDA graph,
  // one per batch shape (DESIGN.md "Step graphs"); the micro-batch that
  // starts the gradient all-reduce of a multi-GPU run stays eager.
  bool cuda_graphs = false;

  bool operator==(const TrainingConfig&) const = default;
};

struct ValidationConfig {
  int64_t every_steps = 1000;  // also at the end of every epoch; 0 = only then

  bool operator==(const ValidationConfig&) const = default;
};

struct CheckpointConfig {
  std::string dir;  // resolved default: <output.dir>/checkpoints
  // Also at every improved validation (for `best`), at the end and when
  // stopped; 0 = only the last step's (the end, or a stop): none by step
  // count and none at an improved validation.
  int64_t every_steps = 1000;
  int keep_last = 3;
  FsMode fs_mode = FsMode::kShared;  // shared: global rank 0 writes; per-node: local rank 0
  ResumeMode resume = ResumeMode::kAuto;

  bool operator==(const CheckpointConfig&) const = default;
};

struct DistributedConfig {
  // Gradient all-reduce bucket size: small, so that only the last bucket
  // waits for the end of backward (the GPU configs set PyTorch's 25).
  double bucket_mb = 1;
  double first_bucket_mb = 1;  // the first bucket (the last layers'), so communication starts early
  bool hierarchical = false;   // reduce within nodes, then across node leaders
  double timeout_s = 300;      // a collective slower than this stops every rank
  // 1: ZeRO-1, AdamW's state sharded over the ranks (reduce-scatter of the
  // gradients, all-gather of the updated weights); 0: every rank keeps it all.
  int zero_stage = 0;
  // The type the gradient all-reduce moves the fp32 gradients in: bf16 or
  // fp16 halve the bytes. NCCL also sums in it (each bucket cast there and
  // back on the communication stream); the MPI reducer rounds each message
  // to it and sums in fp32 (mpi/gradient_reducer.h).
  AllreduceDtype allreduce_dtype = AllreduceDtype::kFp32;

  bool operator==(const DistributedConfig&) const = default;
};

struct OutputConfig {
  std::string dir = "exp";
  std::string metrics_file;  // JSON lines; resolved default: <output.dir>/metrics.jsonl
  // Each rank writes <output.dir>/batches/rank-R.jsonl: per step and
  // micro-batch, its utterances (manifest line, audio, offset, duration) and
  // their target token ids, to replay the run elsewhere
  // (scripts/pytorch/train_reference.py) or find the batch behind a spike.
  bool batch_log = false;
  // Per step, a "timeline" line in the metrics file with every rank's times
  // (ms from the step's start): data, forward + backward, the wait in the
  // gradient all-reduce, the optimizer, and each bucket's bytes and when it
  // was ready, started and ended (DESIGN.md "The step's timeline"); what
  // scripts/step-model.py reads. Off: nothing is recorded.
  bool timeline = false;
  // Each of the first N steps writes a "diagnostics" line in the metrics
  // file: the learning rate applied, how much of the step's output is the
  // blank (mean posterior, share of frames where it is the most probable),
  // the head's blank bias as the step's forward used it and its gradient,
  // and the gradient norm of each part of the model (docs/training.md).
  // Each such step waits for the device and copies the gradients to the
  // host. 0: none.
  int64_t diagnostic_steps = 0;

  bool operator==(const OutputConfig&) const = default;
};

struct Config {
  DataConfig data;
  BatchingConfig batching;
  FeaturesConfig features;
  SpecAugmentConfig spec_augment;
  TokenizerConfig tokenizer;
  ModelConfig model;
  OptimizerConfig optimizer;
  ScheduleConfig schedule;
  PrecisionConfig precision;
  TrainingConfig training;
  ValidationConfig validation;
  CheckpointConfig checkpoint;
  DistributedConfig distributed;
  OutputConfig output;

  bool operator==(const Config&) const = default;
};

// Defaults, then the YAML file (when `path` is not empty), then the
// overrides, then resolve_config and check_config.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {});

// Applies YAML text; `source` (a file name) names it in errors.
void apply_yaml(Config& config, const std::string& yaml_text, const std::string& source);

// Applies command-line overrides: "--section.key=value" or "--section.key"
// followed by "value" as the next argument. A value of null, ~ or nothing
// clears an optional key. Throws Error on any other argument.
void apply_overrides(Config& config, const std::vector<std::string>& args);

// Fills the paths whose defaults derive from output.dir (when empty).
void resolve_config(Config& config);

// Checks ranges and consistency; throws Error naming the key and the value.
void check_config(const Config& config);

// Canonical YAML: every section and key in table order, one line each.
std::string dump_config(const Config& config);

// "section.key: a -> b" for every key whose value differs from `before` to
// `after`, in table order, the values written as dump_config writes them.
std::vector<std::string> config_differences(const Config& before, const Config& after);

// FNV-1a 64 of dump_config(config).
uint64_t config_hash(const Config& config);

// Every "section.key", in table order.
std::vector<std::string> config_keys();

// What a misspelt name probably meant: the candidate nearest to `given` in
// edit distance, within a third of its length (at least 2 edits), or "".
// Config keys and the program's commands use it.
std::string nearest_name(std::string_view given, const std::vector<std::string>& candidates);

}  // namespace mpiasr
