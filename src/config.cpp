// Config loading: the key table (the one place that maps "section.key" to a
// field), typed parsing of YAML scalars with file:line errors, nearest-key
// suggestions by edit distance, overrides, resolution, checks and the
// canonical dump. See src/config.h.
#include "src/config.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <fstream>
#include <set>
#include <sstream>

#include "io/audio.h"
#include "io/checksum.h"
#include "io/text_normalize.h"
#include "src/base/error.h"
#include "src/base/file.h"

namespace mpiasr {

#define MPIASR_ENUM_NAMES(Enum, ...)                             \
  std::span<const char* const> enum_names(Enum) {                \
    static constexpr const char* const kNames[] = {__VA_ARGS__}; \
    return kNames;                                               \
  }
MPIASR_ENUM_NAMES(ManifestFormat, "auto", "tsv", "jsonl", "csv")
MPIASR_ENUM_NAMES(BatchMode, "dynamic", "fixed")
MPIASR_ENUM_NAMES(WindowType, "hann", "povey", "hamming")
MPIASR_ENUM_NAMES(CmvnMode, "global", "utterance", "none")
MPIASR_ENUM_NAMES(TokenizerType, "char", "bpe", "unigram")
MPIASR_ENUM_NAMES(ModelPreset, "tiny", "small", "medium", "large")
MPIASR_ENUM_NAMES(ScheduleType, "noam", "cosine", "constant")
MPIASR_ENUM_NAMES(LrScaling, "none", "linear", "sqrt")
MPIASR_ENUM_NAMES(Precision, "auto", "fp32", "fp16-mixed", "bf16-mixed")
MPIASR_ENUM_NAMES(DeviceType, "auto", "cpu", "cuda")
MPIASR_ENUM_NAMES(FsMode, "shared", "per-node")
MPIASR_ENUM_NAMES(AllreduceDtype, "fp32", "bf16", "fp16")
MPIASR_ENUM_NAMES(ResumeMode, "auto", "never")
#undef MPIASR_ENUM_NAMES

namespace {

// The key being set and where its value comes from ("cfg.yaml:12", or a
// command-line argument), for error messages.
struct Where {
  const std::string& key;
  const std::string& origin;
};

std::string describe(const YAML::Node& node) {
  if (node.IsScalar()) return "'" + node.Scalar() + "'";
  if (node.IsNull()) return "null";
  return node.IsMap() ? "a mapping" : "a sequence";
}

[[noreturn]] void bad_value(const YAML::Node& node, const Where& where, std::string_view expected) {
  MPIASR_FAIL(ExitCode::kUsage, "bad value " << describe(node) << " for '" << where.key << "' in "
                                             << where.origin << ": expected " << expected);
}

const std::string& scalar(const YAML::Node& node, const Where& where, std::string_view expected) {
  if (!node.IsScalar()) bad_value(node, where, expected);
  return node.Scalar();
}

// Integers: the whole text in range, decimal.
template <typename Int>
void parse_integer(const YAML::Node& node, Int& out, const Where& where) {
  const std::string& text = scalar(node, where, "an integer");
  Int value{};
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) {
    bad_value(node, where,
              error == std::errc::result_out_of_range ? "an integer in range" : "an integer");
  }
  out = value;
}

void parse(const YAML::Node& node, int& out, const Where& where) {
  parse_integer(node, out, where);
}
void parse(const YAML::Node& node, int64_t& out, const Where& where) {
  parse_integer(node, out, where);
}
void parse(const YAML::Node& node, uint64_t& out, const Where& where) {
  parse_integer(node, out, where);
}

void parse(const YAML::Node& node, double& out, const Where& where) {
  const std::string& text = scalar(node, where, "a number");
  double value = 0;
  auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || !std::isfinite(value)) {
    bad_value(node, where, "a finite number");
  }
  out = value;
}

void parse(const YAML::Node& node, bool& out, const Where& where) {
  const std::string& text = scalar(node, where, "true or false");
  if (text == "true" || text == "True" || text == "yes" || text == "on") {
    out = true;
  } else if (text == "false" || text == "False" || text == "no" || text == "off") {
    out = false;
  } else {
    bad_value(node, where, "true or false");
  }
}

// Strings: any scalar in UTF-8 (YAML is Unicode text: other bytes would be
// written back to config.yaml as U+FFFD, a different value); an empty value
// (`key:`) is the empty string.
void parse(const YAML::Node& node, std::string& out, const Where& where) {
  out = node.IsNull() ? std::string() : scalar(node, where, "a string");
  try {
    utf8_decode(out);
  } catch (const Error&) {
    bad_value(node, where, "UTF-8 text");
  }
}

template <typename Enum>
requires std::is_enum_v<Enum>
void parse(const YAML::Node& node, Enum& out, const Where& where) {
  std::string choices;
  for (const char* name : enum_names(Enum{})) {
    if (!choices.empty()) choices += '|';
    choices += name;
  }
  const std::string& text = scalar(node, where, "one of " + choices);
  auto names = enum_names(Enum{});
  auto it = std::find(names.begin(), names.end(), text);
  if (it == names.end()) bad_value(node, where, "one of " + choices);
  out = static_cast<Enum>(it - names.begin());
}

// A list of numbers: a YAML sequence, or (from the command line) "[a, b]" or "a,b".
void parse(const YAML::Node& node, std::vector<double>& out, const Where& where) {
  std::vector<YAML::Node> items;
  if (node.IsSequence()) {
    for (const YAML::Node& item : node) items.push_back(item);
  } else {
    std::string text = scalar(node, where, "a list of numbers");
    if (text.starts_with('[') && text.ends_with(']')) text = text.substr(1, text.size() - 2);
    std::stringstream fields(text);
    for (std::string field; std::getline(fields, field, ',');) {
      const size_t begin = field.find_first_not_of(' ');
      const size_t end = field.find_last_not_of(' ');
      items.emplace_back(begin == std::string::npos ? "" : field.substr(begin, end - begin + 1));
    }
  }
  std::vector<double> values;
  for (const YAML::Node& item : items) {
    double value = 0;
    if (!item.IsScalar()) bad_value(node, where, "a list of numbers");
    parse(item, value, where);
    values.push_back(value);
  }
  out = std::move(values);
}

template <typename T>
void parse(const YAML::Node& node, std::optional<T>& out, const Where& where) {
  if (node.IsNull()) {
    out.reset();
    return;
  }
  T value{};
  parse(node, value, where);
  out = value;
}

// The shortest text that parses back to the same double.
std::string number_text(double value) {
  char text[32];
  auto [end, error] = std::to_chars(text, text + sizeof text, value);
  std::string number(text, end);
  // 1e-09 -> 1.0e-09, which YAML 1.1 readers (PyYAML) also take as a float.
  size_t exponent = number.find('e');
  if (exponent != std::string::npos && number.find('.') == std::string::npos) {
    number.insert(exponent, ".0");
  }
  return number;
}

void emit(YAML::Emitter& out, int value) {
  out << value;
}
void emit(YAML::Emitter& out, int64_t value) {
  out << value;
}
void emit(YAML::Emitter& out, uint64_t value) {
  out << value;
}
void emit(YAML::Emitter& out, double value) {
  out << number_text(value);
}
void emit(YAML::Emitter& out, bool value) {
  out << (value ? "true" : "false");
}
void emit(YAML::Emitter& out, const std::string& value) {
  out << YAML::DoubleQuoted << value;
}
template <typename Enum>
requires std::is_enum_v<Enum>
void emit(YAML::Emitter& out, Enum value) {
  out << std::string(to_string(value));
}
void emit(YAML::Emitter& out, const std::vector<double>& values) {
  out << YAML::Flow << YAML::BeginSeq;
  for (double value : values) out << number_text(value);
  out << YAML::EndSeq;
}
template <typename T>
void emit(YAML::Emitter& out, const std::optional<T>& value) {
  if (value) {
    emit(out, *value);
  } else {
    out << YAML::Null;
  }
}

// One row of the key table: the names, how to set and write the field, and
// for an integer field the range every value must be in.
struct Key {
  std::string section;
  std::string name;
  void (*parse)(Config&, const YAML::Node&, const Where&);
  void (*emit)(const Config&, YAML::Emitter&);
  // Integer fields: [min, max], and the field's value (nullopt when unset).
  int64_t min = 0, max = -1;
  std::optional<int64_t> (*integer)(const Config&) = nullptr;
  std::string full() const { return section + "." + name; }
  std::string range() const { return "[" + std::to_string(min) + ", " + std::to_string(max) + "]"; }
  bool in_range(const Config& config) const {
    const std::optional<int64_t> value = integer ? integer(config) : std::nullopt;
    return !value || (*value >= min && *value <= max);
  }
};

// Integer fields that must have a range: every int and int64 (a thread count
// of 10^6, a queue of 10^9 batches or 10^5 layers would crash or exhaust the
// machine instead of failing with a message). The seed, a uint64, takes any value.
template <typename T>
constexpr bool kBoundedInteger =
    std::is_same_v<T, int> || std::is_same_v<T, int64_t> || std::is_same_v<T, std::optional<int>>;

std::optional<int64_t> integer_of(int64_t value) {
  return value;
}
std::optional<int64_t> integer_of(const std::optional<int>& value) {
  return value ? std::optional<int64_t>(*value) : std::nullopt;
}

// Min > Max (the default): no range, which only non-integer fields may have.
template <auto Section, auto Field, int64_t Min = 1, int64_t Max = 0>
Key make_key(const char* section, const char* name) {
  using Value = std::remove_cvref_t<decltype(Config{}.*Section.*Field)>;
  static_assert(!kBoundedInteger<Value> || Min <= Max,
                "an integer key needs its range: MPIASR_INT_KEY(section, field, min, max)");
  Key key{section, name,
          [](Config& config, const YAML::Node& node, const Where& where) {
            parse(node, (config.*Section).*Field, where);
            if constexpr (kBoundedInteger<Value>) {
              const std::optional<int64_t> value = integer_of((config.*Section).*Field);
              if (value && (*value < Min || *value > Max)) {
                bad_value(
                    node, where,
                    "an integer in [" + std::to_string(Min) + ", " + std::to_string(Max) + "]");
              }
            }
          },
          [](const Config& config, YAML::Emitter& out) { emit(out, (config.*Section).*Field); }};
  if constexpr (kBoundedInteger<Value>) {
    key.min = Min;
    key.max = Max;
    key.integer = [](const Config& config) { return integer_of((config.*Section).*Field); };
  }
  return key;
}

#define MPIASR_KEY(section, field) \
  make_key<&Config::section, &decltype(Config::section)::field>(#section, #field)
#define MPIASR_INT_KEY(section, field, min, max)                                             \
  make_key<&Config::section, &decltype(Config::section)::field, int64_t(min), int64_t(max)>( \
      #section, #field)

// Every key, in dump order. A new key: its field in config.h, one line here;
// an integer key with its range, which every value, from the file or the
// command line, must be in.
const std::vector<Key>& key_table() {
  static const std::vector<Key> table = {
      MPIASR_KEY(data, train_manifest),
      MPIASR_KEY(data, valid_manifest),
      MPIASR_KEY(data, test_manifest),
      MPIASR_KEY(data, manifest_format),
      MPIASR_KEY(data, data_root),
      MPIASR_KEY(data, skip_bad),
      MPIASR_KEY(data, max_utterance_seconds),
      MPIASR_KEY(data, speed_perturb),
      MPIASR_KEY(data, speed_factors),
      MPIASR_KEY(batching, mode),
      MPIASR_KEY(batching, max_batch_seconds),
      MPIASR_INT_KEY(batching, max_batch_utterances, 1, 100000),
      MPIASR_INT_KEY(batching, batch_size, 1, 100000),
      MPIASR_INT_KEY(batching, num_buckets, 1, 100000),
      MPIASR_KEY(batching, drop_last),
      MPIASR_KEY(batching, balance_steps),
      MPIASR_INT_KEY(batching, shortest_first_epochs, 0, 1000000),
      MPIASR_INT_KEY(batching, workers, 1, 256),
      MPIASR_INT_KEY(batching, queue_depth, 1, 1024),
      MPIASR_INT_KEY(batching, frame_multiple, 1, 100000),
      MPIASR_INT_KEY(features, sample_rate, kMinSampleRate, kMaxSampleRate),
      MPIASR_INT_KEY(features, n_mels, 1, 1024),
      MPIASR_KEY(features, window),
      MPIASR_KEY(features, preemphasis),
      MPIASR_KEY(features, dither),
      MPIASR_KEY(features, kaldi),
      MPIASR_KEY(features, cmvn),
      MPIASR_KEY(features, cmvn_path),
      MPIASR_KEY(spec_augment, enabled),
      MPIASR_INT_KEY(spec_augment, freq_masks, 0, 1000),
      MPIASR_INT_KEY(spec_augment, freq_width, 0, 1024),
      MPIASR_INT_KEY(spec_augment, time_masks, 0, 10000),
      MPIASR_KEY(spec_augment, time_width_ratio),
      MPIASR_KEY(tokenizer, type),
      MPIASR_INT_KEY(tokenizer, vocab_size, 2, 1000000),
      MPIASR_KEY(tokenizer, model_path),
      MPIASR_KEY(tokenizer, lowercase),
      MPIASR_KEY(tokenizer, strip_punctuation),
      MPIASR_KEY(model, preset),
      MPIASR_INT_KEY(model, d_model, 1, 65536),
      MPIASR_INT_KEY(model, n_layers, 1, 1000),
      MPIASR_INT_KEY(model, n_heads, 1, 1024),
      MPIASR_INT_KEY(model, ff_mult, 1, 64),
      MPIASR_INT_KEY(model, conv_kernel, 1, 1023),
      MPIASR_INT_KEY(model, subsampling_channels, 1, 65536),
      MPIASR_KEY(model, dropout),
      MPIASR_KEY(model, prior_bias),
      MPIASR_KEY(optimizer, lr),
      MPIASR_KEY(optimizer, beta1),
      MPIASR_KEY(optimizer, beta2),
      MPIASR_KEY(optimizer, eps),
      MPIASR_KEY(optimizer, weight_decay),
      MPIASR_KEY(optimizer, clip_norm),
      MPIASR_KEY(schedule, type),
      MPIASR_INT_KEY(schedule, warmup_steps, 0, 1e12),
      MPIASR_KEY(schedule, noam_factor),
      MPIASR_KEY(schedule, min_lr),
      MPIASR_KEY(schedule, lr_scaling),
      MPIASR_INT_KEY(schedule, reference_batch, 1, 1000000),
      MPIASR_KEY(precision, mode),
      MPIASR_KEY(precision, init_scale),
      MPIASR_INT_KEY(precision, growth_interval, 1, 1000000000),
      MPIASR_INT_KEY(precision, max_skips_at_min_scale, 1, 1000000000),
      MPIASR_KEY(training, device),
      MPIASR_INT_KEY(training, epochs, 1, 1000000),
      MPIASR_INT_KEY(training, max_steps, 0, 1e15),
      MPIASR_KEY(training, max_minutes),
      MPIASR_INT_KEY(training, accumulation, 1, 100000),
      MPIASR_KEY(training, seed),
      MPIASR_INT_KEY(training, threads, 0, kMaxThreads),
      MPIASR_KEY(training, zero_infinity),
      MPIASR_INT_KEY(training, log_every, 1, 1000000000),
      MPIASR_KEY(training, gpu_reserve_mb),
      MPIASR_KEY(training, cuda_graphs),
      MPIASR_INT_KEY(validation, every_steps, 0, 1e15),
      MPIASR_KEY(checkpoint, dir),
      MPIASR_INT_KEY(checkpoint, every_steps, 0, 1e15),
      MPIASR_INT_KEY(checkpoint, keep_last, 1, 100000),
      MPIASR_KEY(checkpoint, fs_mode),
      MPIASR_KEY(checkpoint, resume),
      MPIASR_KEY(distributed, bucket_mb),
      MPIASR_KEY(distributed, first_bucket_mb),
      MPIASR_KEY(distributed, hierarchical),
      MPIASR_KEY(distributed, timeout_s),
      MPIASR_INT_KEY(distributed, zero_stage, 0, 1),
      MPIASR_KEY(distributed, allreduce_dtype),
      MPIASR_KEY(output, dir),
      MPIASR_KEY(output, metrics_file),
      MPIASR_KEY(output, batch_log),
      MPIASR_KEY(output, timeline),
      MPIASR_INT_KEY(output, diagnostic_steps, 0, 1e15),
  };
  return table;
}
#undef MPIASR_KEY
#undef MPIASR_INT_KEY

const Key* find_key(std::string_view full) {
  for (const Key& key : key_table()) {
    if (key.full() == full) return &key;
  }
  return nullptr;
}

std::vector<std::string> section_names() {
  std::vector<std::string> sections;
  for (const Key& key : key_table()) {
    if (sections.empty() || sections.back() != key.section) sections.push_back(key.section);
  }
  return sections;
}

bool is_section(std::string_view name) {
  auto sections = section_names();
  return std::find(sections.begin(), sections.end(), name) != sections.end();
}

size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

}  // namespace

std::string nearest_name(std::string_view given, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, given.size() / 3) + 1;
  for (const std::string& candidate : candidates) {
    size_t distance = edit_distance(given, candidate);
    if (distance < best_distance) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

namespace {

std::string join(const std::vector<std::string>& items) {
  std::string text;
  for (const std::string& item : items) {
    if (!text.empty()) text += ", ";
    text += item;
  }
  return text;
}

// The error for an unknown "section.key" (or a bare top-level name), with the
// nearest valid key, or the same key name in another section, or the list of
// what is valid.
[[noreturn]] void unknown_key(const std::string& given, const std::string& origin) {
  std::vector<std::string> full_keys = config_keys();
  size_t dot = given.find('.');
  std::string section = given.substr(0, dot);
  std::string name = dot == std::string::npos ? given : given.substr(dot + 1);
  std::string suggestion = nearest_name(given, full_keys);
  if (suggestion.empty()) {
    for (const Key& key : key_table()) {
      if (key.name == name) suggestion = key.full();
    }
  }
  if (suggestion.empty() && dot == std::string::npos)
    suggestion = nearest_name(given, section_names());
  std::string what = dot == std::string::npos ? "section" : "key";
  if (!suggestion.empty()) {
    MPIASR_FAIL(ExitCode::kUsage, "unknown " << what << " '" << given << "' in " << origin
                                             << "; did you mean '" << suggestion << "'?");
  }
  if (is_section(section)) {
    std::vector<std::string> keys;
    for (const Key& key : key_table()) {
      if (key.section == section) keys.push_back(key.name);
    }
    MPIASR_FAIL(ExitCode::kUsage, "unknown key '" << given << "' in " << origin << "; section '"
                                                  << section << "' has: " << join(keys));
  }
  MPIASR_FAIL(ExitCode::kUsage, "unknown " << what << " '" << given << "' in " << origin
                                           << "; sections are: " << join(section_names()));
}

std::string line_of(const std::string& source, const YAML::Node& node) {
  return source + ":" + std::to_string(node.Mark().line + 1);
}

void set_key(Config& config, const std::string& full, const YAML::Node& value,
             const std::string& origin) {
  const Key* key = find_key(full);
  if (!key) unknown_key(full, origin);
  key->parse(config, value, Where{full, origin});
}

template <typename T>
void require(bool ok, const char* key, const T& value, const char* rule) {
  if (!ok) MPIASR_FAIL(ExitCode::kUsage, "config key '" << key << "' = " << value << ": " << rule);
}

}  // namespace

std::vector<std::string> config_keys() {
  std::vector<std::string> keys;
  for (const Key& key : key_table()) keys.push_back(key.full());
  return keys;
}

void apply_yaml(Config& config, const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    MPIASR_FAIL(ExitCode::kUsage, source << ":" << e.mark.line + 1 << ": invalid YAML: " << e.msg);
  }
  if (root.IsNull()) return;
  if (!root.IsMap()) {
    MPIASR_FAIL(ExitCode::kUsage, line_of(source, root)
                                      << ": the top level must be a mapping of sections");
  }
  std::set<std::string> seen_sections, seen_keys;
  for (const auto& section_entry : root) {
    const YAML::Node& section_node = section_entry.first;
    const YAML::Node& body = section_entry.second;
    std::string section = section_node.IsScalar() ? section_node.Scalar() : describe(section_node);
    std::string origin = line_of(source, section_node);
    if (!is_section(section)) {
      // Name the first key inside, so 'optimzer: {lr: 1}' reads as 'optimzer.lr'.
      if (body.IsMap() && body.size() > 0) {
        unknown_key(section + "." + body.begin()->first.Scalar(),
                    line_of(source, body.begin()->first));
      }
      unknown_key(section, origin);
    }
    if (!seen_sections.insert(section).second) {
      MPIASR_FAIL(ExitCode::kUsage, "section '" << section << "' appears twice in " << origin);
    }
    if (body.IsNull()) continue;
    if (!body.IsMap()) {
      MPIASR_FAIL(ExitCode::kUsage, "section '" << section << "' in " << origin
                                                << " must be a mapping of keys, got "
                                                << describe(body));
    }
    for (const auto& entry : body) {
      std::string full = section + "." + (entry.first.IsScalar() ? entry.first.Scalar() : "?");
      std::string key_origin = line_of(source, entry.first);
      if (find_key(full) && !seen_keys.insert(full).second) {
        MPIASR_FAIL(ExitCode::kUsage,
                    "key '" << full << "' appears twice, again in " << key_origin);
      }
      set_key(config, full, entry.second, key_origin);
    }
  }
}

void apply_overrides(Config& config, const std::vector<std::string>& args) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    std::string origin = "command line argument '" + arg + "'";
    if (!arg.starts_with("--") || arg.size() == 2) {
      MPIASR_FAIL(ExitCode::kUsage,
                  "unexpected " << origin << ": overrides are --section.key=value");
    }
    size_t equals = arg.find('=');
    std::string key = arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    std::string value;
    if (equals != std::string::npos) {
      value = arg.substr(equals + 1);
    } else if (i + 1 < args.size()) {
      value = args[++i];
      origin = "command line arguments '" + arg + " " + value + "'";
    } else {
      MPIASR_FAIL(ExitCode::kUsage,
                  "missing value in " << origin << ": overrides are --section.key=value");
    }
    bool is_null =
        value.empty() || value == "null" || value == "~" || value == "Null" || value == "NULL";
    set_key(config, key, is_null ? YAML::Node(YAML::NodeType::Null) : YAML::Node(value), origin);
  }
}

void resolve_config(Config& config) {
  const std::string& dir = config.output.dir;
  if (config.checkpoint.dir.empty()) config.checkpoint.dir = dir + "/checkpoints";
  if (config.output.metrics_file.empty()) config.output.metrics_file = dir + "/metrics.jsonl";
  if (config.features.cmvn_path.empty() && config.features.cmvn == CmvnMode::kGlobal) {
    config.features.cmvn_path = dir + "/cmvn.json";
  }
  if (config.tokenizer.model_path.empty()) {
    bool is_char = config.tokenizer.type == TokenizerType::kChar;
    config.tokenizer.model_path = dir + (is_char ? "/tokens.txt" : "/tokenizer.model");
  }
}

void check_config(const Config& c) {
  for (const Key& key : key_table()) {
    if (!key.in_range(c)) {
      require(false, key.full().c_str(), *key.integer(c), ("must be in " + key.range()).c_str());
    }
  }
  require(c.data.max_utterance_seconds >= 0, "data.max_utterance_seconds",
          c.data.max_utterance_seconds, "must be >= 0 (0 = no limit)");
  require(!c.data.speed_factors.empty(), "data.speed_factors", "[]", "must list a factor");
  for (double factor : c.data.speed_factors) {
    require(factor >= 0.5 && factor <= 2, "data.speed_factors", factor, "must be in [0.5, 2]");
  }
  require(c.batching.max_batch_seconds > 0, "batching.max_batch_seconds",
          c.batching.max_batch_seconds, "must be positive");
  require(c.features.preemphasis >= 0 && c.features.preemphasis < 1, "features.preemphasis",
          c.features.preemphasis, "must be in [0, 1)");
  require(c.features.dither >= 0, "features.dither", c.features.dither, "must be >= 0");
  require(c.spec_augment.freq_width <= c.features.n_mels, "spec_augment.freq_width",
          c.spec_augment.freq_width, "must be at most features.n_mels");
  require(c.spec_augment.time_width_ratio >= 0 && c.spec_augment.time_width_ratio <= 1,
          "spec_augment.time_width_ratio", c.spec_augment.time_width_ratio, "must be in [0, 1]");
  if (c.model.conv_kernel) {
    require(*c.model.conv_kernel % 2 == 1, "model.conv_kernel", *c.model.conv_kernel,
            "must be odd");
  }
  if (c.model.d_model && c.model.n_heads) {
    require(*c.model.d_model % *c.model.n_heads == 0, "model.d_model", *c.model.d_model,
            "must be a multiple of model.n_heads");
  }
  if (c.model.dropout) {
    require(*c.model.dropout >= 0 && *c.model.dropout < 1, "model.dropout", *c.model.dropout,
            "must be in [0, 1)");
  }
  require(c.optimizer.lr > 0, "optimizer.lr", c.optimizer.lr, "must be positive");
  require(c.optimizer.beta1 >= 0 && c.optimizer.beta1 < 1, "optimizer.beta1", c.optimizer.beta1,
          "must be in [0, 1)");
  require(c.optimizer.beta2 >= 0 && c.optimizer.beta2 < 1, "optimizer.beta2", c.optimizer.beta2,
          "must be in [0, 1)");
  require(c.optimizer.eps > 0, "optimizer.eps", c.optimizer.eps, "must be positive");
  require(c.optimizer.weight_decay >= 0, "optimizer.weight_decay", c.optimizer.weight_decay,
          "must be >= 0");
  require(c.optimizer.clip_norm >= 0, "optimizer.clip_norm", c.optimizer.clip_norm,
          "must be >= 0 (0 = no clipping)");
  require(c.schedule.type != ScheduleType::kNoam || c.schedule.warmup_steps > 0,
          "schedule.warmup_steps", c.schedule.warmup_steps, "must be positive for noam");
  require(c.schedule.noam_factor > 0, "schedule.noam_factor", c.schedule.noam_factor,
          "must be positive");
  require(c.schedule.min_lr >= 0, "schedule.min_lr", c.schedule.min_lr, "must be >= 0");
  require(c.precision.init_scale > 0, "precision.init_scale", c.precision.init_scale,
          "must be positive");
  require(c.training.device != DeviceType::kCpu || c.precision.mode == Precision::kAuto ||
              c.precision.mode == Precision::kFp32,
          "precision.mode", to_string(c.precision.mode), "not available with training.device cpu");
  require(c.training.device != DeviceType::kCpu || !c.training.cuda_graphs, "training.cuda_graphs",
          "true", "not available with training.device cpu");
  require(c.training.max_minutes >= 0, "training.max_minutes", c.training.max_minutes,
          "must be >= 0 (0 = no limit)");
  require(c.training.gpu_reserve_mb >= 0, "training.gpu_reserve_mb", c.training.gpu_reserve_mb,
          "must be >= 0");
  require(c.distributed.bucket_mb > 0, "distributed.bucket_mb", c.distributed.bucket_mb,
          "must be positive");
  require(c.distributed.first_bucket_mb > 0, "distributed.first_bucket_mb",
          c.distributed.first_bucket_mb, "must be positive");
  require(c.distributed.timeout_s > 0, "distributed.timeout_s", c.distributed.timeout_s,
          "must be positive");
  require(!c.output.dir.empty(), "output.dir", "\"\"", "must not be empty");
  require(c.output.diagnostic_steps == 0 || c.distributed.zero_stage == 0,
          "output.diagnostic_steps", c.output.diagnostic_steps,
          "needs every rank to hold the whole gradient (distributed.zero_stage 0)");
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  Config config;
  if (!path.empty()) {
    require_readable_file(path, "config file", ExitCode::kUsage);
    apply_yaml(config, read_file(path, ExitCode::kUsage), path);
  }
  apply_overrides(config, overrides);
  resolve_config(config);
  check_config(config);
  return config;
}

std::string dump_config(const Config& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  const std::string* section = nullptr;
  for (const Key& key : key_table()) {
    if (!section || *section != key.section) {
      if (section) out << YAML::EndMap;
      section = &key.section;
      out << YAML::Key << key.section << YAML::Value << YAML::BeginMap;
    }
    out << YAML::Key << key.name << YAML::Value;
    key.emit(config, out);
  }
  out << YAML::EndMap << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

std::vector<std::string> config_differences(const Config& before, const Config& after) {
  auto value_text = [](const Key& key, const Config& config) {
    YAML::Emitter out;
    key.emit(config, out);
    return std::string(out.c_str());
  };
  std::vector<std::string> differences;
  for (const Key& key : key_table()) {
    const std::string old_value = value_text(key, before), new_value = value_text(key, after);
    if (old_value != new_value)
      differences.push_back(key.full() + ": " + old_value + " -> " + new_value);
  }
  return differences;
}

uint64_t config_hash(const Config& config) {
  return fnv1a64(dump_config(config));
}

}  // namespace mpiasr
