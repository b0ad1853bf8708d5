// The config system: defaults, YAML files, command-line overrides, unknown
// keys (file:line and the nearest valid key), wrong types, range checks, the
// canonical dump round trip, the hash, and the example configs.
#include "src/config.h"

#include <gtest/gtest.h>
#include <unistd.h>
#include <yaml-cpp/yaml.h>

#include <filesystem>
#include <fstream>

#include "io/checksum.h"
#include "src/base/error.h"

namespace mpiasr {
namespace {

// The message of the Error that `f` throws (with ExitCode::kUsage), or "".
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage) << e.what();
    return e.what();
  }
  return "";
}

std::string yaml_error(const std::string& text) {
  return error_of([&] {
    Config config;
    apply_yaml(config, text, "cfg.yaml");
  });
}

std::string override_error(const std::vector<std::string>& args) {
  return error_of([&] { load_config("", args); });
}

#define EXPECT_CONTAINS(text, part) \
  EXPECT_NE(std::string(text).find(part), std::string::npos) << "in: " << (text)

TEST(Config, Defaults) {
  Config c = load_config("");
  EXPECT_EQ(c.optimizer.lr, 1e-3);
  EXPECT_EQ(c.optimizer.beta1, 0.9);
  EXPECT_EQ(c.optimizer.beta2, 0.98);
  EXPECT_EQ(c.optimizer.weight_decay, 1e-3);
  EXPECT_EQ(c.features.n_mels, 80);
  EXPECT_EQ(c.spec_augment.freq_masks, 2);
  EXPECT_EQ(c.spec_augment.freq_width, 27);
  EXPECT_EQ(c.spec_augment.time_masks, 10);
  EXPECT_EQ(c.spec_augment.time_width_ratio, 0.05);
  EXPECT_EQ(c.batching.mode, BatchMode::kDynamic);
  EXPECT_EQ(c.model.preset, ModelPreset::kSmall);
  EXPECT_FALSE(c.model.d_model.has_value());
  EXPECT_EQ(c.precision.init_scale, 65536);
  EXPECT_EQ(c.precision.growth_interval, 2000);
  EXPECT_EQ(c.checkpoint.fs_mode, FsMode::kShared);
  EXPECT_EQ(c.checkpoint.resume, ResumeMode::kAuto);
  // Paths that default under output.dir are resolved.
  EXPECT_EQ(c.checkpoint.dir, "exp/checkpoints");
  EXPECT_EQ(c.output.metrics_file, "exp/metrics.jsonl");
  EXPECT_EQ(c.features.cmvn_path, "exp/cmvn.json");
  EXPECT_EQ(c.tokenizer.model_path, "exp/tokens.txt");
  EXPECT_EQ(to_string(c.checkpoint.fs_mode), "shared");
  EXPECT_EQ(to_string(Precision::kFp16Mixed), "fp16-mixed");
  EXPECT_EQ(to_string(Precision::kBf16Mixed), "bf16-mixed");
}

TEST(Config, ParsesAFileThenOverrides) {
  std::string path =
      std::string(MPIASR_BINARY_DIR) + "/config_test-" + std::to_string(::getpid()) + ".yaml";
  std::ofstream(path) << R"(# a comment
data:
  train_manifest: corpus/train.tsv   # trailing comment
  data_root: /mnt/audio
optimizer:
  lr: 5e-4
  beta2: 0.999
model:
  preset: medium
  d_model: 144
  dropout: 0.2
schedule: {type: cosine, warmup_steps: 100}
checkpoint:
  fs_mode: per-node
  every_steps: 50
distributed:
  hierarchical: yes
  allreduce_dtype: bf16
output:
  dir: /tmp/run1
)";
  Config c = load_config(
      path, {"--optimizer.lr=0.25", "--model.n_heads", "4", "--model.dropout=null",
             "--data.train_manifest=/x/y z.tsv", "--training.seed=18446744073709551615"});
  std::filesystem::remove(path);
  EXPECT_EQ(c.optimizer.lr, 0.25);  // the override wins over the file
  EXPECT_EQ(c.optimizer.beta2, 0.999);
  EXPECT_EQ(c.optimizer.beta1, 0.9);  // untouched default
  EXPECT_EQ(c.data.train_manifest, "/x/y z.tsv");
  EXPECT_EQ(c.data.data_root, "/mnt/audio");
  EXPECT_EQ(c.model.preset, ModelPreset::kMedium);
  EXPECT_EQ(c.model.d_model, 144);
  EXPECT_EQ(c.model.n_heads, 4);
  EXPECT_FALSE(c.model.dropout.has_value());
  EXPECT_EQ(c.schedule.type, ScheduleType::kCosine);
  EXPECT_EQ(c.schedule.warmup_steps, 100);
  EXPECT_EQ(c.checkpoint.fs_mode, FsMode::kPerNode);
  EXPECT_EQ(c.checkpoint.every_steps, 50);
  EXPECT_TRUE(c.distributed.hierarchical);
  EXPECT_EQ(c.distributed.allreduce_dtype, AllreduceDtype::kBf16);
  EXPECT_EQ(c.training.seed, 18446744073709551615ull);
  EXPECT_EQ(c.checkpoint.dir, "/tmp/run1/checkpoints");
}

TEST(Config, UnknownKeysNameFileLineAndNearestKey) {
  std::string text(10, '\n');  // the section on line 11, its key on line 12
  EXPECT_CONTAINS(yaml_error(text + "optimzer:\n  lr: 0.1\n"),
                  "unknown key 'optimzer.lr' in cfg.yaml:12; did you mean 'optimizer.lr'?");
  EXPECT_CONTAINS(yaml_error("optimizer:\n  beta1: 0.9\n  lrr: 1\n"),
                  "unknown key 'optimizer.lrr' in cfg.yaml:3; did you mean 'optimizer.lr'?");
  EXPECT_CONTAINS(yaml_error("optimizer:\n  warmup_steps: 5\n"),
                  "did you mean 'schedule.warmup_steps'?");
  EXPECT_CONTAINS(yaml_error("lr: 0.1\n"),
                  "unknown section 'lr' in cfg.yaml:1; did you mean 'optimizer.lr'?");
  EXPECT_CONTAINS(yaml_error("optimiser:\n"), "did you mean 'optimizer'?");
  EXPECT_CONTAINS(yaml_error("optimizer:\n  zzzzzzzzzz: 1\n"),
                  "section 'optimizer' has: lr, beta1, beta2, eps, weight_decay, clip_norm");
  EXPECT_CONTAINS(yaml_error("qqqqqqqq:\n"), "sections are: data, batching, features");
  EXPECT_CONTAINS(override_error({"--optimzer.lr=1"}),
                  "unknown key 'optimzer.lr' in command line argument '--optimzer.lr=1'; did you "
                  "mean 'optimizer.lr'?");
  EXPECT_CONTAINS(override_error({"lr=1"}), "overrides are --section.key=value");
  EXPECT_CONTAINS(override_error({"--optimizer.lr"}), "missing value");
}

TEST(Config, WrongTypesNameFileLineValueAndType) {
  EXPECT_CONTAINS(yaml_error("data:\n  skip_bad: false\noptimizer:\n  lr: fast\n"),
                  "bad value 'fast' for 'optimizer.lr' in cfg.yaml:4: expected a finite number");
  EXPECT_CONTAINS(yaml_error("batching:\n  batch_size: 2.5\n"),
                  "bad value '2.5' for 'batching.batch_size' in cfg.yaml:2: expected an integer");
  EXPECT_CONTAINS(yaml_error("batching:\n  batch_size: 99999999999\n"), "an integer in range");
  EXPECT_CONTAINS(yaml_error("batching:\n  drop_last: maybe\n"), "expected true or false");
  EXPECT_CONTAINS(yaml_error("schedule:\n  type: nom\n"),
                  "bad value 'nom' for 'schedule.type' in cfg.yaml:2: expected one of "
                  "noam|cosine|constant");
  EXPECT_CONTAINS(yaml_error("data:\n  train_manifest: [a, b]\n"),
                  "bad value a sequence for 'data.train_manifest'");
  EXPECT_CONTAINS(yaml_error("data: 3\n"), "section 'data' in cfg.yaml:1 must be a mapping");
  EXPECT_CONTAINS(yaml_error("optimizer:\n  lr: 1\n  lr: 2\n"),
                  "key 'optimizer.lr' appears twice, again in cfg.yaml:3");
  EXPECT_CONTAINS(yaml_error("optimizer:\n  lr: [1\n"), "cfg.yaml:");
  EXPECT_CONTAINS(yaml_error("- 1\n- 2\n"), "the top level must be a mapping");
  EXPECT_CONTAINS(override_error({"--training.epochs=ten"}),
                  "bad value 'ten' for 'training.epochs' in command line argument "
                  "'--training.epochs=ten': expected an integer");
  EXPECT_CONTAINS(override_error({"--optimizer.lr=nan"}), "expected a finite number");
}

TEST(Config, SpeedFactorsAreAListFromTheFileOrTheCommandLine) {
  Config c = load_config("");
  EXPECT_FALSE(c.data.speed_perturb);
  EXPECT_EQ(c.data.speed_factors, (std::vector<double>{0.9, 1.0, 1.1}));
  EXPECT_EQ(override_error({"--data.speed_factors=[0.8, 1.2]"}), "");
  c = load_config("", {"--data.speed_perturb=true", "--data.speed_factors=0.95,1,1.05"});
  EXPECT_TRUE(c.data.speed_perturb);
  EXPECT_EQ(c.data.speed_factors, (std::vector<double>{0.95, 1.0, 1.05}));
  c = load_config("", {"--data.speed_factors=[0.8, 1.2]"});
  EXPECT_EQ(c.data.speed_factors, (std::vector<double>{0.8, 1.2}));
  Config from_yaml;
  apply_yaml(from_yaml, "data:\n  speed_factors: [0.9, 1.1]\n", "cfg.yaml");
  EXPECT_EQ(from_yaml.data.speed_factors, (std::vector<double>{0.9, 1.1}));
  EXPECT_CONTAINS(yaml_error("data:\n  speed_factors: [0.9, fast]\n"),
                  "bad value 'fast' for 'data.speed_factors' in cfg.yaml:2");
  EXPECT_CONTAINS(override_error({"--data.speed_factors=0.9,3"}),
                  "config key 'data.speed_factors' = 3: must be in [0.5, 2]");
  EXPECT_CONTAINS(override_error({"--data.speed_factors=[]"}), "data.speed_factors");
}

// A config path that is a folder, or missing, is a usage error naming it
// (a folder used to read as an empty config).
TEST(Config, ConfigFileMustBeAReadableFile) {
  const std::string folder = std::filesystem::temp_directory_path().string();
  EXPECT_CONTAINS(error_of([&] { load_config(folder); }),
                  "config file '" + folder + "': is a folder, not a file");
  EXPECT_CONTAINS(error_of([&] { load_config(folder + "/no-such-config.yaml"); }),
                  "config file '" + folder + "/no-such-config.yaml': file not found");
}

// A string that is not UTF-8 is rejected: the dump (config.yaml, the hash)
// would carry U+FFFD instead of its bytes, so it would not load back to the
// same config (found by tests/fuzz/config_fuzz).
TEST(Config, StringsMustBeUtf8) {
  EXPECT_CONTAINS(yaml_error("data:\n  test_manifest: data/corpu\xff\xffs/test.tsv\n"),
                  "for 'data.test_manifest' in cfg.yaml:2: expected UTF-8 text");
  EXPECT_CONTAINS(override_error({"--output.dir=run-\xe9"}),
                  "for 'output.dir' in command line argument '--output.dir=run-\xe9': expected "
                  "UTF-8 text");
  EXPECT_EQ(load_config("", {"--output.dir=run-\xc3\xa9"}).output.dir, "run-\xc3\xa9");
}

// Every integer key has a range in the key table, checked where the value
// comes from (file:line or the argument) and again by check_config for a
// config built in code.
TEST(Config, IntegerKeysAreBounded) {
  EXPECT_CONTAINS(override_error({"--training.threads=100000"}),
                  "bad value '100000' for 'training.threads' in command line argument "
                  "'--training.threads=100000': expected an integer in [0, 4096]");
  EXPECT_CONTAINS(yaml_error("batching:\n  workers: 1000000\n"),
                  "bad value '1000000' for 'batching.workers' in cfg.yaml:2: expected an integer "
                  "in [1, 256]");
  EXPECT_CONTAINS(yaml_error("model:\n  n_layers: -3\n"), "expected an integer in [1, 1000]");
  EXPECT_CONTAINS(override_error({"--training.max_steps=2000000000000000"}),
                  "expected an integer in [0, 1000000000000000]");
  EXPECT_CONTAINS(override_error({"--batching.queue_depth=0"}), "expected an integer in [1, 1024]");
  EXPECT_CONTAINS(override_error({"--features.sample_rate=8"}),
                  "expected an integer in [1000, 1000000]");
  EXPECT_EQ(override_error({"--training.threads=0", "--batching.workers=256"}), "");
  Config built;
  built.batching.queue_depth = 1 << 30;
  EXPECT_CONTAINS(error_of([&] { check_config(built); }),
                  "config key 'batching.queue_depth' = 1073741824: must be in [1, 1024]");
}

TEST(Config, RangeChecksNameKeyAndValue) {
  EXPECT_CONTAINS(override_error({"--optimizer.lr=-1"}), "config key 'optimizer.lr' = -1");
  EXPECT_CONTAINS(override_error({"--model.conv_kernel=30"}), "must be odd");
  EXPECT_CONTAINS(override_error({"--model.d_model=100", "--model.n_heads=3"}),
                  "multiple of model.n_heads");
  EXPECT_CONTAINS(override_error({"--checkpoint.keep_last=0"}), "checkpoint.keep_last");
  EXPECT_CONTAINS(override_error({"--precision.max_skips_at_min_scale=0"}),
                  "bad value '0' for 'precision.max_skips_at_min_scale' in command line argument "
                  "'--precision.max_skips_at_min_scale=0': expected an integer in [1, 1000000000]");
  EXPECT_CONTAINS(override_error({"--training.gpu_reserve_mb=-1"}),
                  "config key 'training.gpu_reserve_mb' = -1");
  EXPECT_CONTAINS(override_error({"--training.device=cpu", "--precision.mode=fp16-mixed"}),
                  "not available with training.device cpu");
  EXPECT_CONTAINS(override_error({"--training.device=cpu", "--precision.mode=bf16-mixed"}),
                  "not available with training.device cpu");
  EXPECT_EQ(override_error({"--training.device=cuda", "--precision.mode=bf16-mixed"}), "");
  EXPECT_CONTAINS(override_error({"--training.device=cpu", "--training.cuda_graphs=true"}),
                  "config key 'training.cuda_graphs' = true: not available with training.device "
                  "cpu");
  EXPECT_EQ(override_error({"--training.device=cuda", "--training.cuda_graphs=true",
                            "--batching.frame_multiple=64"}),
            "");
  EXPECT_CONTAINS(override_error({"--batching.frame_multiple=0"}),
                  "expected an integer in [1, 100000]");
  EXPECT_EQ(override_error({"--training.device=cpu", "--distributed.allreduce_dtype=fp16"}), "");
  EXPECT_CONTAINS(override_error({"--distributed.allreduce_dtype=fp8"}), "fp8");
  EXPECT_EQ(override_error({"--training.device=cuda", "--distributed.allreduce_dtype=fp16"}), "");
  EXPECT_EQ(override_error({"--model.d_model=144", "--model.n_heads=4"}), "");
  EXPECT_CONTAINS(override_error({"--output.diagnostic_steps=50", "--distributed.zero_stage=1"}),
                  "config key 'output.diagnostic_steps' = 50: needs every rank to hold the whole "
                  "gradient (distributed.zero_stage 0)");
  EXPECT_EQ(override_error({"--output.diagnostic_steps=50"}), "");
}

// A config with every kind of field away from its default.
Config unusual_config() {
  Config c;
  c.data.train_manifest = "a: b # not a comment";
  c.data.valid_manifest = "null";
  c.data.test_manifest = "";
  c.data.manifest_format = ManifestFormat::kJsonl;
  c.data.max_utterance_seconds = 17.25;
  c.data.speed_perturb = true;
  c.data.speed_factors = {0.85, 1.0 / 3 + 0.8, 1.2};
  c.batching.mode = BatchMode::kFixed;
  c.features.window = WindowType::kPovey;
  c.features.preemphasis = 0.97;
  c.features.dither = 1e-5;
  c.model.preset = ModelPreset::kLarge;
  c.model.d_model = 512;
  c.model.dropout = 0.1;
  c.model.prior_bias = true;
  c.optimizer.lr = 0.1 + 0.2;  // 0.30000000000000004
  c.optimizer.eps = 1e-9;
  c.schedule.lr_scaling = LrScaling::kSqrt;
  c.training.seed = 18446744073709551615ull;
  c.training.max_steps = 123456789012;
  c.training.max_minutes = 59.5;
  c.training.gpu_reserve_mb = 1536.5;
  c.training.cuda_graphs = true;
  c.batching.frame_multiple = 64;
  c.precision.max_skips_at_min_scale = 3;
  c.distributed.hierarchical = true;
  c.distributed.allreduce_dtype = AllreduceDtype::kFp16;
  c.checkpoint.fs_mode = FsMode::kPerNode;
  c.output.dir = "/tmp/out dir";
  c.output.diagnostic_steps = 200;
  resolve_config(c);
  return c;
}

TEST(Config, DumpParsesBackToTheSameConfig) {
  for (const Config& original : {Config{}, unusual_config()}) {
    std::string dump = dump_config(original);
    Config back;
    apply_yaml(back, dump, "dump.yaml");
    EXPECT_TRUE(back == original) << dump;
    EXPECT_EQ(dump_config(back), dump);
  }
  // The dump holds every key exactly once, under its section.
  YAML::Node dumped = YAML::Load(dump_config(Config{}));
  size_t count = 0;
  for (const auto& section : dumped) count += section.second.size();
  EXPECT_EQ(count, config_keys().size());
  for (const std::string& key : config_keys()) {
    size_t dot = key.find('.');
    EXPECT_TRUE(dumped[key.substr(0, dot)][key.substr(dot + 1)].IsDefined()) << key;
  }
  EXPECT_TRUE(dumped["model"]["d_model"].IsNull());
}

TEST(Config, HashIsStableAndSensitive) {
  Config base = load_config("");
  EXPECT_EQ(config_hash(base), fnv1a64(dump_config(base)));
  EXPECT_EQ(config_hash(base), config_hash(load_config("")));

  // The same values written differently hash the same.
  Config a, b;
  apply_yaml(a, "optimizer:\n  lr: 0.001  # peak\nmodel: {d_model: 256}\n", "a.yaml");
  apply_yaml(b, "model:\n  d_model: 256\noptimizer:\n  lr: 1e-3\n", "b.yaml");
  EXPECT_EQ(config_hash(a), config_hash(b));

  std::vector<std::vector<std::string>> changes = {
      {},
      {"--optimizer.lr=0.0010000000000000002"},
      {"--model.d_model=256"},
      {"--data.train_manifest=data/corpus/train.tsv"},
      {"--distributed.hierarchical=true"},
      {"--schedule.type=cosine"},
      {"--training.seed=1235"},
      {"--output.dir=exp2"},
  };
  std::set<uint64_t> hashes;
  for (const auto& change : changes) hashes.insert(config_hash(load_config("", change)));
  EXPECT_EQ(hashes.size(), changes.size());
}

TEST(Config, ExampleConfigsLoad) {
  for (const char* preset : {"tiny", "small", "medium", "large"}) {
    std::string path = std::string(MPIASR_SOURCE_DIR) + "/scripts/configs/" + preset + ".yaml";
    Config c = load_config(path);
    EXPECT_EQ(to_string(c.model.preset), preset);
    EXPECT_EQ(c.data.train_manifest, "data/corpus/train.tsv");
    EXPECT_EQ(c.data.valid_manifest, "data/corpus/valid.tsv");
    EXPECT_EQ(c.output.dir, std::string("exp/") + preset);
  }
}

TEST(ConfigDifferencesTest, NamesEveryChangedKeyWithBothValues) {
  const Config before = load_config("", {});
  const Config after = load_config("", {"--optimizer.lr=0.005", "--model.d_model=48"});
  EXPECT_EQ(config_differences(before, after),
            (std::vector<std::string>{"model.d_model: ~ -> 48", "optimizer.lr: 0.001 -> 0.005"}));
  EXPECT_TRUE(config_differences(after, after).empty());
}

TEST(Config, OneHourRecipeConfigValidatesOnUnseenVoicesWithinTheHour) {
  const Config c = load_config(std::string(MPIASR_SOURCE_DIR) + "/scripts/configs/cpu-1h.yaml");
  EXPECT_EQ(c.data.train_manifest, "data/cpu-1h/train.tsv");
  EXPECT_EQ(c.data.valid_manifest, "data/cpu-1h/valid-unseen.tsv");
  EXPECT_EQ(c.data.test_manifest, "data/cpu-1h/test-unseen.tsv");
  EXPECT_GT(c.training.max_minutes, 0);
  EXPECT_LE(c.training.max_minutes, 60);
  EXPECT_EQ(c.training.device, DeviceType::kCpu);
}

}  // namespace
}  // namespace mpiasr
