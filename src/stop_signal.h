// Stopping a run cleanly: the first SIGINT or SIGTERM (Ctrl-C, a scheduler's
// preemption or time limit) asks the trainer to finish the step in progress,
// write a checkpoint and exit; a second one ends the process at once (the
// handler is installed with SA_RESETHAND, so the default action is back).
//
// A rank also stops when its launcher is gone: under mpirun or srun every
// rank's parent process is the launcher or its daemon on the node, and when
// that dies (kill -9 of mpirun) the rank is reparented. Its output went
// through the launcher, so nothing it logs is seen any more; the trainer
// stops at the next step boundary, and before a checkpoint, without writing
// one (docs/training.md, "Failures").
#pragma once

#include <csignal>

namespace mpiasr {

class StopSignals {
 public:
  // Installs the handlers for SIGINT and SIGTERM; the destructor restores the
  // previous ones.
  StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;
  ~StopSignals();

  // The signal received since the handlers were installed, 0 when none.
  static int received();
  // Whether this process's parent has changed since the handlers were
  // installed: for a rank a launcher started, the launcher is gone.
  static bool parent_changed();

 private:
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
};

}  // namespace mpiasr
