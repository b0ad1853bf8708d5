// Data preparation ahead of training (`mpiasr prepare`, or the start of
// `mpiasr train` when a file is missing): the tokenizer and the global CMVN
// statistics, both computed from the training set.
//
//   tokenizer  trained on the normalized train transcripts (char: the alphabet
//              seen; bpe/unigram: sentencepiece), saved to tokenizer.model_path
//   CMVN       sums over every frame of every train utterance (no dither),
//              saved to features.cmvn_path (features.cmvn = global only)
// Both from the utterances train keeps: bad ones are dropped first (with
// data.skip_bad; src/dataset.h), then those too short for the model
// (src/utterance_length.h), after which the tokenizer is made again without
// their transcripts; so train alone makes the files prepare makes.
//
// They are made on world rank 0 (mpi::run_on_main) and copied to every node
// (mpi::broadcast_file), so node-local disks work without a shared one. The
// statistics are summed in fixed chunks of utterances, merged in chunk order,
// so the file is the same for any thread count.
#pragma once

#include <ostream>

#include "io/cmvn.h"
#include "io/fbank.h"
#include "io/manifest.h"
#include "mpi/context.h"
#include "src/config.h"

namespace mpiasr {

struct PrepareOptions {
  bool force = false;          // remake the files even when present
  bool check_samples = false;  // decode every sample (with data.skip_bad train does too)
};

// Makes what is missing (everything with force) on rank 0, then copies it to
// every node, which is cheap when they have it already. Collective: every rank
// calls it. Progress goes to `log` on rank 0.
void prepare_data(const Config& config, const mpi::Context& ctx, const PrepareOptions& options,
                  std::ostream& log);

// CMVN statistics over every utterance of `manifest`, on `threads` threads;
// a progress line goes to `log` (when not null) every 10 seconds.
CmvnStats compute_cmvn_stats(const Manifest& manifest, const Fbank& fbank, int threads,
                             std::ostream* log);

}  // namespace mpiasr
