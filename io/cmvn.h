// Cepstral mean and variance normalization of log-mel features.
//
// Global CMVN: per mel bin j, over every frame of the training set,
//   mean[j] = sum[j] / frames,  var[j] = sum_sq[j] / frames - mean[j]^2
//   y[t, j] = (x[t, j] - mean[j]) / max(sqrt(var[j]), std_floor)
// The statistics are plain sums in double, so ranks accumulate their shard
// and merge (add) them; the JSON file holds the sums, not the mean and std:
//   {"n_mels": 80, "frames": 1234.0, "sum": [80 doubles], "sum_sq": [80 doubles]}
//
// The statistics a file holds are checked at load: finite, frames > 0, and
// means and variances that log-mel features can have.
//
// Per-utterance CMVN: the same with the statistics of the utterance itself
// (std floor 1e-5).
//
// Features: float [frames, n_mels], row-major, normalized in place.
#pragma once

#include <string>
#include <vector>

namespace mpiasr {

// The range of a log-mel feature: the log of a float energy, clamped below
// by the log floor (io/fbank.h), lies in [log(smallest float), log(largest
// float)].
inline constexpr double kMinLogMel = -103.28;  // log(1.4e-45) = -103.279
inline constexpr double kMaxLogMel = 88.73;    // log(3.4028e38) = 88.723

// The std floor of per-utterance CMVN.
inline constexpr float kPerUtteranceStdFloor = 1e-5f;

struct CmvnStats {
  std::vector<double> sum, sum_sq;  // [n_mels], empty before the first accumulate
  double frames = 0;

  void accumulate(const float* feats, int num_frames, int n_mels);
  // Adds other's sums to these; either side may be empty.
  void merge(const CmvnStats& other);
  // Written to path + ".tmp", then renamed, so a reader never sees half a
  // file; throws Error(kUsage) naming the file and why it cannot be written.
  void save(const std::string& path) const;
  // Throws Error(kBadInput) naming the file, the field and what is wrong
  // with it: a file that does not parse, frames not > 0, sums not finite,
  // or statistics no log-mel features have (a bin's mean outside
  // [kMinLogMel, kMaxLogMel], its variance negative or over the square of
  // half that range).
  static CmvnStats load(const std::string& path);
};

struct Cmvn {
  std::vector<float> mean, inv_std;  // [n_mels]

  static Cmvn from_stats(const CmvnStats& stats, float std_floor = 1e-5f);
  void apply(float* feats, int num_frames, int n_mels) const;
};

void normalize_per_utterance(float* feats, int num_frames, int n_mels);

}  // namespace mpiasr
