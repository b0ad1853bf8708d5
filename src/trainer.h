// Training: `mpiasr train`. Every rank calls train(); world rank 0 prints and
// writes the metrics, the writer ranks of checkpoint.fs_mode write checkpoints
// and hold the lock of output.dir from start to end (src/output_lock.h).
//
// One step (DESIGN.md "How data flows in one training step"):
//   take training.accumulation micro-batches from the loader (this rank's
//   batches of the epoch, from the sampler)  ->  all-reduce their target-token
//   count (invariant 4: the loss divisor of every rank)  ->  forward + backward
//   of each micro-batch with the loss scale, gradients of the summed loss
//   accumulating; during the last backward the GradientReducer sums them over
//   ranks bucket by bucket  ->  global gradient norm (the same on every rank)
//   ->  loss scaler decision  ->  clip  ->  AdamW with the schedule's LR for
//   this step. The gradient is divided by the loss scale and the token count
//   together, when it is unscaled (norm and AdamW), not before backward: in
//   fp16 a gradient divided by the global token count shrinks with the number
//   of ranks, and small ones would fall into fp16's subnormals.
// Validation (loss, CER, WER summed over ranks) every validation.every_steps,
// at the end of each epoch and of training; the best validation CER is kept
// as the checkpoint root's `best`. Checkpoints every checkpoint.every_steps,
// at every improved validation, at the end, and when a stop is requested;
// with checkpoint.every_steps = 0 only at the end or the stop.
// training.max_minutes ends training as the end of the schedule does
// (validation, checkpoint) with the step in progress when the wall time
// trained, resumed runs included, reaches it; state.json keeps that time.
//
// Randomness: the sampler's shuffles from (seed, epoch); dither and SpecAugment
// from (seed, epoch, utterance) in the loader; dropout from (seed, step, rank,
// micro-batch). Nothing else draws, so resuming from a checkpoint repeats the
// uninterrupted run bit for bit (same world size and thread count).
#pragma once

#include <cstdint>
#include <ostream>

#include "mpi/context.h"
#include "src/config.h"

namespace mpiasr {

struct TrainOptions {
  // Stop with a checkpoint after this step, as a preemption would; a rerun
  // resumes. 0: the initialized model, before any step (step-00000000);
  // -1: train to the end.
  int64_t stop_at_step = -1;
};

struct TrainResult {
  int64_t step = 0;       // the last step trained
  bool finished = false;  // reached the end of the schedule or of training.max_minutes
  int stop_signal = 0;    // SIGINT/SIGTERM that stopped it early, 0 when none
};

// Trains as `config` says (collective). Progress goes to `log` on world rank 0.
TrainResult train(const Config& config, mpi::Context& ctx, const TrainOptions& options,
                  std::ostream& log);

}  // namespace mpiasr
