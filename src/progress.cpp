// Progress reporting helpers; see progress.h.
#include "src/progress.h"

#include <cmath>
#include <cstdio>

namespace mpiasr {

std::string format_duration(double seconds) {
  if (!std::isfinite(seconds) || seconds < 0) return "?";
  const long total = std::lround(seconds);
  char text[32];
  if (total < 60) {
    std::snprintf(text, sizeof(text), "%lds", total);
  } else if (total < 3600) {
    std::snprintf(text, sizeof(text), "%ldm%02lds", total / 60, total % 60);
  } else {
    std::snprintf(text, sizeof(text), "%ldh%02ldm", total / 3600, total % 3600 / 60);
  }
  return text;
}

ProgressThrottle::ProgressThrottle(double interval_seconds)
    : interval_(interval_seconds), start_(Clock::now()), last_(start_) {}

bool ProgressThrottle::ready() {
  const Clock::time_point now = Clock::now();
  if (std::chrono::duration<double>(now - last_).count() < interval_) return false;
  last_ = now;
  return true;
}

double ProgressThrottle::elapsed() const {
  return std::chrono::duration<double>(Clock::now() - start_).count();
}

}  // namespace mpiasr
