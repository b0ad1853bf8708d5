// Stopping a run cleanly: the first SIGINT or SIGTERM (Ctrl-C, a scheduler's
// preemption or time limit) asks the trainer to finish the step in progress,
// write a checkpoint and exit; a second one ends the process at once (the
// handler is installed with SA_RESETHAND, so the default action is back).
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

 private:
  struct sigaction previous_int_ {};
  struct sigaction previous_term_ {};
};

}  // namespace mpiasr
