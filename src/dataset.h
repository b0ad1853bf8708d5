// A dataset as a run reads it: the manifest the config names, checked, cut to
// the configured lengths, its transcripts normalized the way the tokenizer
// sees them.
//
//   read_manifest (format, $data_root)  ->  validate_manifest (every problem at
//   once, file:line; skip_bad drops instead; with skip_bad every sample is
//   decoded, see SampleCheck)  ->  drop utterances longer than
//   data.max_utterance_seconds  ->  check the dynamic batch budget  ->
//   normalize_text (tokenizer.lowercase, tokenizer.strip_punctuation)
// Evaluation keeps every utterance (keep_long): a test set is scored whole.
//
// The manifest hash (FNV-1a 64 over every kept utterance's audio path, offset,
// duration and normalized transcript) is what ranks compare at start-up and
// what a checkpoint records.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "io/manifest.h"
#include "io/sampler.h"
#include "io/text_normalize.h"
#include "src/config.h"

namespace mpiasr {

// Which audio validation decodes. Headers show a missing, corrupt or
// truncated file; only the samples show NaN or infinite values. With
// data.skip_bad every command decodes every sample at start-up, so the
// utterances dropped are decided before anything is built from the data
// (tokenizer, CMVN statistics, batches) and are the same in prepare, train,
// eval and transcribe. Without it, train, eval and transcribe read the
// headers and stop (exit 3) at a bad sample when they reach it, naming the
// manifest line.
enum class SampleCheck {
  kWithSkipBad,  // every sample when data.skip_bad is set, else the headers
  kAlways,       // every sample (prepare)
  kHeaders,      // the headers only (filling the duration cache ahead of the other ranks)
};

struct DatasetOptions {
  SampleCheck samples = SampleCheck::kWithSkipBad;
  bool require_transcript = true;  // false for transcription of unlabelled audio
  bool keep_long = false;          // evaluation: no length limit, no batch budget check
  int threads = 0;                 // validation threads; 0 = one per core
};

// The normalization of transcripts the tokenizer config asks for.
TextNormalizeOptions text_normalize_options(const TokenizerConfig& tokenizer);

// Reads, validates, filters and normalizes the manifest at `path` as `config`
// says; `name` ("train", "valid", ...) labels the summary written to `log`
// (nullptr: silent). Throws Error(kBadInput) listing every problem found.
Manifest load_dataset(const Config& config, const std::string& path, const std::string& name,
                      const DatasetOptions& options, std::ostream* log);

uint64_t manifest_hash(const Manifest& manifest);

// Seconds of every utterance, in manifest order.
std::vector<double> utterance_durations(const Manifest& manifest);

// How the training sampler batches a dataset for world_size ranks:
// batching.*, training.seed, and training.accumulation (balance_steps).
SamplerOptions sampler_options(const Config& config, int world_size);

}  // namespace mpiasr
