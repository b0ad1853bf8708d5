// The scheduling class of a helper thread (Linux, sched(7)), so that it
// takes as little as possible from the threads that compute. Neither call
// needs a privilege; a refusal leaves the thread as it was.
//
//   lower_thread_priority()  SCHED_IDLE, or else nice 19: the thread runs
//                            only on a core that nothing else wants (the
//                            loader's workers).
//   BatchScheduling          SCHED_BATCH while the object lives, then back to
//                            SCHED_OTHER: the thread keeps its fair share of
//                            a busy core, but waking up it no longer
//                            preempts the thread running there; it waits
//                            for the next scheduler tick, or runs at once on
//                            an idle core (the gradient reducer's
//                            communication thread while backward runs).
#pragma once

#include <sched.h>
#include <sys/resource.h>

namespace mpiasr {

inline void lower_thread_priority() {
  const sched_param none{};
  if (sched_setscheduler(0, SCHED_IDLE, &none) != 0) setpriority(PRIO_PROCESS, 0, 19);
}

class BatchScheduling {
 public:
  BatchScheduling() {
    const sched_param none{};
    active_ = sched_setscheduler(0, SCHED_BATCH, &none) == 0;
  }
  ~BatchScheduling() { end(); }
  BatchScheduling(const BatchScheduling&) = delete;
  BatchScheduling& operator=(const BatchScheduling&) = delete;

  // Back to SCHED_OTHER before the object ends.
  void end() {
    if (!active_) return;
    const sched_param none{};
    sched_setscheduler(0, SCHED_OTHER, &none);
    active_ = false;
  }

 private:
  bool active_ = false;
};

}  // namespace mpiasr
