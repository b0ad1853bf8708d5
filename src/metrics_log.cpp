// The metrics file; see metrics_log.h.
#include "src/metrics_log.h"

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
    std::istringstream lines(read_file(path));
    for (std::string line; std::getline(lines, line);) {
      nlohmann::json record = nlohmann::json::parse(line, nullptr, false);
      const bool earlier = record.is_object() && record.contains("step") &&
                           record["step"].is_number() && record["step"].get<double>() <= start_step;
      if (earlier) kept += line + "\n";
    }
  }
  write_file_atomic(path, kept);
  out_.open(path, std::ios::app);
  if (!out_) MPIASR_FAIL(ExitCode::kFailure, "cannot open the metrics file " << path);
}

void MetricsLog::write(const nlohmann::json& record) {
  if (!out_.is_open()) return;
  out_ << record.dump() << "\n";
  out_.flush();
  if (!out_) MPIASR_FAIL(ExitCode::kFailure, "cannot write the metrics file " << path_);
}

}  // namespace mpiasr
