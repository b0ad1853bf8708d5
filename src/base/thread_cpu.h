// CPU time of the calling thread (CLOCK_THREAD_CPUTIME_ID) in seconds: what a
// helper thread (the loader's workers, the gradient reducer's communication
// thread) costs the cores that compute. Time the kernel spends for the thread
// in system calls counts; interrupt work it triggers may be charged to
// whichever thread was running.
#pragma once

#include <time.h>

namespace mpiasr {

inline double thread_cpu_seconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return double(now.tv_sec) + 1e-9 * double(now.tv_nsec);
}

}  // namespace mpiasr
