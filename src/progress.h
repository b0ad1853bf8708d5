// Progress reporting helpers for long work: durations as people read them and
// a throttle that lets a progress line through every few seconds.
#pragma once

#include <chrono>
#include <string>

namespace mpiasr {

// "7s", "12m03s", "2h05m".
std::string format_duration(double seconds);

// ready() is true at most once per `interval_seconds` (and never on the first call).
class ProgressThrottle {
 public:
  explicit ProgressThrottle(double interval_seconds);
  bool ready();
  // Seconds since construction.
  double elapsed() const;

 private:
  using Clock = std::chrono::steady_clock;
  double interval_;
  Clock::time_point start_, last_;
};

}  // namespace mpiasr
