// The emulator's tests of its checks: what a launch that a check stops says.
#pragma once

#include <string>

#include "src/base/error.h"

namespace mpiasr::emu_test {

// The launch's message, or "" when it did not throw.
template <typename Launch>
std::string launch_error(Launch&& launch) {
  try {
    launch();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace mpiasr::emu_test
