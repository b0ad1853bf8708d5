// The metrics file; see metrics_log.h.
#include "src/metrics_log.h"

#include <fcntl.h>

#include <filesystem>
#include <sstream>

#include "src/base/error.h"
#include "src/base/file.h"

namespace mpiasr {

MetricsLog::MetricsLog(const std::string& path, bool enabled, int64_t start_step) : path_(path) {
  if (!enabled) return;
  std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty())
    make_folders(parent.string(), "output.metrics_file's folder", ExitCode::kUsage);
  std::string kept;
  if (std::filesystem::exists(path)) {
    std::istringstream lines(read_file(path, ExitCode::kUsage));
    for (std::string line; std::getline(lines, line);) {
      nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
      const bool earlier = record.is_object() && record.contains("step") &&
                           record["step"].is_number() && record["step"].get<double>() <= start_step;
      if (earlier) kept += line + "\n";
    }
  }
  write_file_atomic(path, kept, ExitCode::kUsage);
  file_ = open_file(path, O_WRONLY | O_APPEND, ExitCode::kUsage);
}

void MetricsLog::write(const nlohmann::json& record) {
  if (file_.get() < 0) return;
  write_all(file_, record.dump() + "\n", path_, ExitCode::kUsage);
}

}  // namespace mpiasr
