// libFuzzer target: the YAML config with command-line overrides. The input is
// YAML text, then (after the first NUL byte, if any) override arguments, one
// per line. Every failure must be a usage Error (exit code 2); a config that
// loads must dump to YAML that loads back to the same config and dump.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "src/base/error.h"
#include "src/config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mpiasr;
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string yaml(input.substr(0, nul));
  std::vector<std::string> overrides;
  if (nul != std::string_view::npos) {
    std::string_view rest = input.substr(nul + 1);
    while (!rest.empty()) {
      const size_t end = rest.find('\n');
      overrides.emplace_back(rest.substr(0, end));
      rest.remove_prefix(end == std::string_view::npos ? rest.size() : end + 1);
    }
  }
  Config config;
  try {
    apply_yaml(config, yaml, "fuzz.yaml");
    apply_overrides(config, overrides);
    resolve_config(config);
    check_config(config);
  } catch (const Error& error) {
    if (error.code() != ExitCode::kUsage) std::abort();
    return 0;
  }
  const std::string dump = dump_config(config);
  Config reloaded;
  apply_yaml(reloaded, dump, "dump of fuzz.yaml");
  check_config(reloaded);
  if (!(reloaded == config) || dump_config(reloaded) != dump) std::abort();
  return 0;
}
