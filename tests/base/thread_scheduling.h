// The scheduling class and nice value of every thread of this process
// (sched_getscheduler and getpriority of each task in /proc/self/task), for
// the tests of what helper threads run at (src/base/thread_policy.h).
#pragma once

#include <sched.h>
#include <sys/resource.h>
#include <sys/types.h>

#include <cerrno>
#include <filesystem>
#include <string>
#include <vector>

namespace mpiasr {

struct ThreadScheduling {
  int policy = SCHED_OTHER;  // SCHED_OTHER, SCHED_BATCH, SCHED_IDLE, ...
  int nice = 0;
};

// A thread that ends while it is read is left out.
inline std::vector<ThreadScheduling> thread_scheduling() {
  std::vector<ThreadScheduling> threads;
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    const pid_t tid = pid_t(std::stol(task.path().filename().string()));
    const int policy = sched_getscheduler(tid);
    errno = 0;
    const int nice = getpriority(PRIO_PROCESS, id_t(tid));
    if (policy >= 0 && errno == 0) threads.push_back({policy & ~SCHED_RESET_ON_FORK, nice});
  }
  return threads;
}

}  // namespace mpiasr
