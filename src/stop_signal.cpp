// Stopping a run cleanly on SIGINT/SIGTERM; see stop_signal.h.
#include "src/stop_signal.h"

#include <unistd.h>

namespace mpiasr {

namespace {

volatile std::sig_atomic_t g_received = 0;
pid_t g_parent = 0;  // getppid() when the handlers were installed

void on_signal(int signal) {
  g_received = signal;
}

}  // namespace

StopSignals::StopSignals() {
  g_received = 0;
  g_parent = getppid();
  struct sigaction action {};
  action.sa_handler = on_signal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESETHAND;
  sigaction(SIGINT, &action, &previous_int_);
  sigaction(SIGTERM, &action, &previous_term_);
}

StopSignals::~StopSignals() {
  sigaction(SIGINT, &previous_int_, nullptr);
  sigaction(SIGTERM, &previous_term_, nullptr);
}

int StopSignals::received() {
  return g_received;
}

bool StopSignals::parent_changed() {
  return g_parent != 0 && getppid() != g_parent;
}

}  // namespace mpiasr
