// CMVN statistics, their JSON file, and normalization (see cmvn.h).
#include "io/cmvn.h"

#include <algorithm>
#include <cmath>
#include <fstream>

#include <nlohmann/json.hpp>

#include "src/base/error.h"
#include "src/base/file.h"

namespace mpiasr {

void CmvnStats::accumulate(const float* feats, int num_frames, int n_mels) {
  MPIASR_CHECK(n_mels > 0 && num_frames >= 0,
               "cmvn: frames " << num_frames << ", n_mels " << n_mels);
  if (sum.empty()) {
    sum.assign(n_mels, 0.0);
    sum_sq.assign(n_mels, 0.0);
  }
  MPIASR_CHECK(static_cast<int>(sum.size()) == n_mels,
               "cmvn: statistics have " << sum.size() << " bins, features " << n_mels);
  for (int t = 0; t < num_frames; ++t) {
    const float* row = feats + static_cast<size_t>(t) * n_mels;
    for (int j = 0; j < n_mels; ++j) {
      const double x = row[j];
      sum[j] += x;
      sum_sq[j] += x * x;
    }
  }
  frames += num_frames;
}

void CmvnStats::merge(const CmvnStats& other) {
  if (other.sum.empty()) return;
  if (sum.empty()) {
    *this = other;
    return;
  }
  MPIASR_CHECK(sum.size() == other.sum.size(), "cmvn: merging statistics of "
                                                   << sum.size() << " and " << other.sum.size()
                                                   << " bins");
  for (size_t j = 0; j < sum.size(); ++j) {
    sum[j] += other.sum[j];
    sum_sq[j] += other.sum_sq[j];
  }
  frames += other.frames;
}

void CmvnStats::save(const std::string& path) const {
  const nlohmann::json json = {
      {"n_mels", sum.size()}, {"frames", frames}, {"sum", sum}, {"sum_sq", sum_sq}};
  write_file_atomic(path, json.dump(1) + "\n", ExitCode::kUsage);
}

CmvnStats CmvnStats::load(const std::string& path) {
  std::ifstream file(path);
  if (!file) MPIASR_FAIL(ExitCode::kBadInput, "cmvn: cannot open " << path);
  nlohmann::json json;
  try {
    json = nlohmann::json::parse(file);
  } catch (const nlohmann::json::exception& e) {
    MPIASR_FAIL(ExitCode::kBadInput, "cmvn: " << path << ": " << e.what());
  }
  CmvnStats stats;
  size_t n_mels = 0;
  try {
    n_mels = json.at("n_mels").get<size_t>();
    stats.frames = json.at("frames").get<double>();
    stats.sum = json.at("sum").get<std::vector<double>>();
    stats.sum_sq = json.at("sum_sq").get<std::vector<double>>();
  } catch (const nlohmann::json::exception& e) {
    MPIASR_FAIL(ExitCode::kBadInput, "cmvn: " << path << ": " << e.what());
  }
  if (stats.sum.size() != n_mels || stats.sum_sq.size() != n_mels)
    MPIASR_FAIL(ExitCode::kBadInput, "cmvn: " << path << ": n_mels " << n_mels << " but sum has "
                                              << stats.sum.size() << " and sum_sq "
                                              << stats.sum_sq.size() << " values");
  if (!(stats.frames > 0) || !std::isfinite(stats.frames))
    MPIASR_FAIL(ExitCode::kBadInput, "cmvn: " << path << ": frames " << stats.frames
                                              << ": statistics of at least one frame are needed");
  const double low = kMinLogMel, high = kMaxLogMel, widest_std = (high - low) / 2;
  for (size_t j = 0; j < n_mels; ++j) {
    const double sum = stats.sum[j], sum_sq = stats.sum_sq[j];
    if (!std::isfinite(sum) || !std::isfinite(sum_sq) || !(sum_sq >= 0))
      MPIASR_FAIL(ExitCode::kBadInput, "cmvn: " << path << ": bin " << j << " has sum " << sum
                                                << ", sum_sq " << sum_sq
                                                << " (finite, sum_sq >= 0 expected)");
    const double mean = sum / stats.frames, mean_sq = sum_sq / stats.frames;
    if (!(mean >= low && mean <= high))
      MPIASR_FAIL(ExitCode::kBadInput, "cmvn: " << path << ": bin " << j << ": sum " << sum
                                                << " / frames " << stats.frames << " = mean "
                                                << mean << ", outside [" << low << ", " << high
                                                << "], the range of log-mel features");
    // E[x^2] >= E[x]^2 for any values; the sums round at about 1e-16 each.
    const double variance = mean_sq - mean * mean;
    if (variance < -1e-6 * mean_sq || variance > widest_std * widest_std)
      MPIASR_FAIL(ExitCode::kBadInput, "cmvn: " << path << ": bin " << j << ": sum_sq " << sum_sq
                                                << " / frames " << stats.frames
                                                << " - mean^2 = variance " << variance
                                                << ", outside [0, " << widest_std * widest_std
                                                << "], what log-mel features in [" << low << ", "
                                                << high << "] can have");
  }
  return stats;
}

Cmvn Cmvn::from_stats(const CmvnStats& stats, float std_floor) {
  MPIASR_CHECK(stats.frames > 0 && !stats.sum.empty(),
               "cmvn: statistics of " << stats.frames << " frames");
  Cmvn cmvn;
  for (size_t j = 0; j < stats.sum.size(); ++j) {
    const double mean = stats.sum[j] / stats.frames;
    const double variance = std::max(0.0, stats.sum_sq[j] / stats.frames - mean * mean);
    cmvn.mean.push_back(static_cast<float>(mean));
    cmvn.inv_std.push_back(
        static_cast<float>(1.0 / std::max(std::sqrt(variance), static_cast<double>(std_floor))));
  }
  return cmvn;
}

void Cmvn::apply(float* feats, int num_frames, int n_mels) const {
  MPIASR_CHECK(static_cast<int>(mean.size()) == n_mels,
               "cmvn: statistics have " << mean.size() << " bins, features " << n_mels);
  for (int t = 0; t < num_frames; ++t) {
    float* row = feats + static_cast<size_t>(t) * n_mels;
    for (int j = 0; j < n_mels; ++j) row[j] = (row[j] - mean[j]) * inv_std[j];
  }
}

void normalize_per_utterance(float* feats, int num_frames, int n_mels) {
  if (num_frames == 0) return;
  CmvnStats stats;
  stats.accumulate(feats, num_frames, n_mels);
  Cmvn::from_stats(stats, kPerUtteranceStdFloor).apply(feats, num_frames, n_mels);
}

}  // namespace mpiasr
