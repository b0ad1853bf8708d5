// Loading a dataset for a run; see dataset.h.
#include "src/dataset.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

#include "io/checksum.h"
#include "io/utterance_check.h"
#include "src/base/error.h"

namespace mpiasr {

namespace {

std::string manifest_format_name(ManifestFormat format) {
  switch (format) {
    case ManifestFormat::kAuto:
      return "auto";
    case ManifestFormat::kTsv:
      return "tsv";
    case ManifestFormat::kJsonl:
      return "nemo";
    case ManifestFormat::kCsv:
      return "speechbrain";
  }
  return "auto";
}

// Writes the first of `problems`, one "  file:line: what" line each, and
// how many more there are.
void write_some(std::ostream& log, const std::vector<InputProblem>& problems,
                const std::string& prefix) {
  constexpr size_t kShown = 20;
  for (size_t i = 0; i < std::min(problems.size(), kShown); ++i) {
    log << prefix << to_string(problems[i]) << "\n";
  }
  if (problems.size() > kShown)
    log << prefix << "... and " << problems.size() - kShown << " more\n";
}

double total_seconds(const Manifest& manifest) {
  double seconds = 0;
  for (const Utterance& utterance : manifest.utterances) seconds += utterance.duration;
  return seconds;
}

}  // namespace

TextNormalizeOptions text_normalize_options(const TokenizerConfig& tokenizer) {
  TextNormalizeOptions options;
  options.lower_case = tokenizer.lowercase;
  options.strip_punctuation = tokenizer.strip_punctuation;
  return options;
}

Manifest load_dataset(const Config& config, const std::string& path, const std::string& name,
                      const DatasetOptions& options, std::ostream* log) {
  if (path.empty()) {
    MPIASR_FAIL(ExitCode::kUsage, "no " << name << " manifest: set data." << name << "_manifest");
  }
  ManifestOptions manifest_options;
  manifest_options.format = manifest_format_name(config.data.manifest_format);
  if (!config.data.data_root.empty()) {
    manifest_options.substitutions["data_root"] = config.data.data_root;
  }
  Manifest manifest = read_manifest(path, manifest_options);

  ValidationOptions validation;
  validation.skip_bad = config.data.skip_bad;
  validation.check_samples = options.samples == SampleCheck::kAlways ||
                             (options.samples == SampleCheck::kWithSkipBad && config.data.skip_bad);
  validation.require_transcript = options.require_transcript;
  validation.threads = options.threads;
  ValidationReport report = validate_manifest(manifest, validation);
  if (log && report.dropped > 0) *log << name << ": " << report.summary() << "\n";
  if (log) write_some(*log, report.warnings, name + ": warning: ");

  const double max_seconds = options.keep_long ? 0.0 : config.data.max_utterance_seconds;
  if (max_seconds > 0) {
    std::vector<Utterance> kept;
    std::vector<InputProblem> dropped;
    for (Utterance& utterance : manifest.utterances) {
      if (utterance.duration > max_seconds) {
        std::ostringstream what;
        what << "audio file '" << utterance.audio_path << "' lasts " << utterance.duration << " s";
        dropped.push_back({manifest.path, utterance.line, what.str()});
      } else {
        kept.push_back(std::move(utterance));
      }
    }
    if (log && !dropped.empty()) {
      *log << name << ": dropped " << dropped.size() << " utterances longer than "
           << "data.max_utterance_seconds = " << max_seconds << " s:\n";
      write_some(*log, dropped, "  ");
    }
    manifest.utterances = std::move(kept);
  }
  if (manifest.utterances.empty()) {
    MPIASR_FAIL(ExitCode::kBadInput, path << ": no utterance left to use");
  }
  if (config.batching.mode == BatchMode::kDynamic && !options.keep_long) {
    for (const Utterance& utterance : manifest.utterances) {
      if (utterance.duration > config.batching.max_batch_seconds) {
        MPIASR_FAIL(ExitCode::kBadInput,
                    path << ":" << utterance.line << ": utterance " << utterance.id << " lasts "
                         << utterance.duration << " s, more than batching.max_batch_seconds = "
                         << config.batching.max_batch_seconds
                         << " (raise it, or lower data.max_utterance_seconds to drop it)");
      }
    }
  }

  const TextNormalizeOptions normalize = text_normalize_options(config.tokenizer);
  for (Utterance& utterance : manifest.utterances) {
    utterance.transcript = normalize_text(utterance.transcript, normalize);
  }
  if (log) {
    *log << name << ": " << manifest.utterances.size() << " utterances, " << std::fixed
         << std::setprecision(2) << total_seconds(manifest) / 3600 << " h (" << path << ")\n"
         << std::defaultfloat;
  }
  return manifest;
}

uint64_t manifest_hash(const Manifest& manifest) {
  std::ostringstream text;
  text << std::setprecision(17);
  for (const Utterance& utterance : manifest.utterances) {
    text << utterance.audio_path << '\t' << utterance.offset << '\t' << utterance.duration << '\t'
         << utterance.transcript << '\n';
  }
  return fnv1a64(text.str());
}

std::vector<double> utterance_durations(const Manifest& manifest) {
  std::vector<double> durations;
  durations.reserve(manifest.utterances.size());
  for (const Utterance& utterance : manifest.utterances) durations.push_back(utterance.duration);
  return durations;
}

SamplerOptions sampler_options(const Config& config, int world_size) {
  SamplerOptions sampler;
  sampler.mode = std::string(to_string(config.batching.mode));
  sampler.max_batch_seconds = config.batching.max_batch_seconds;
  sampler.max_batch_utterances = config.batching.max_batch_utterances;
  sampler.batch_size = config.batching.batch_size;
  sampler.num_buckets = config.batching.num_buckets;
  sampler.drop_last = config.batching.drop_last;
  if (config.batching.balance_steps) {
    sampler.step_batches = world_size * config.training.accumulation;
  }
  sampler.shortest_first_epochs = config.batching.shortest_first_epochs;
  sampler.seed = config.training.seed;
  return sampler;
}

}  // namespace mpiasr
