// libFuzzer target: a checkpoint's state.json. The input is written as the
// state.json of ROOT/step-00000001 next to one data file (data.bin, "abc")
// and read the ways the program reads it: the intact check, read_checkpoint,
// TrainingState::from_json and locate_checkpoint (as eval --ckpt does, with
// the folder, the root and a `latest` pointer). Every failure must be a
// checkpoint Error; a state that passes must list only intact files.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "io/checkpoint.h"
#include "src/base/error.h"
#include "src/training_checkpoint.h"

namespace {

namespace fs = std::filesystem;

void write(const fs::path& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

template <typename F>
void expect_checkpoint_error_or_success(F&& f) {
  try {
    f();
  } catch (const mpiasr::Error& error) {
    if (error.code() != mpiasr::ExitCode::kCheckpoint) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mpiasr;
  static const fs::path root =
      fs::temp_directory_path() / ("mpiasr_state_fuzz_" + std::to_string(getpid()));
  static const std::string dir = checkpoint_dir(root.string(), 1);
  static const bool made = [] {
    fs::create_directories(dir);
    write(fs::path(dir) / "data.bin", "abc");
    write(root / "latest", "step-00000001\n");
    return true;
  }();
  (void)made;
  const std::string text(reinterpret_cast<const char*>(data), size);
  write(fs::path(dir) / "state.json", text);

  const bool intact = !checkpoint_problem(dir).has_value();
  expect_checkpoint_error_or_success([&] {
    CheckpointFiles files = read_checkpoint(root.string(), 1);
    if (!intact) std::abort();  // read_checkpoint accepts only what checkpoint_problem accepts
    for (const auto& [name, bytes] : files.files) {
      if (name != "data.bin" || bytes != "abc") std::abort();
    }
    TrainingState::from_json(files.state, dir + "/state.json");
  });
  const auto log = [](const std::string&) {};
  for (const std::string& path : {dir, root.string()}) {
    expect_checkpoint_error_or_success([&] {
      const CheckpointLocation location = locate_checkpoint(path, log);
      if (location.step != 1) std::abort();
    });
  }
  return 0;
}
