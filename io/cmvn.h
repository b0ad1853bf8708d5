// Cepstral mean and variance normalization of log-mel features.
//
// Global CMVN: per mel bin j, over every frame of the training set,
//   mean[j] = sum[j] / frames,  var[j] = sum_sq[j] / frames - mean[j]^2
//   y[t, j] = (x[t, j] - mean[j]) / max(sqrt(var[j]), std_floor)
// The statistics are plain sums in double, so ranks accumulate their shard
// and merge (add) them; the JSON file holds the sums, not the mean and std:
//   {"n_mels": 80, "frames": 1234.0, "sum": [80 doubles], "sum_sq": [80 doubles]}
//
// Per-utterance CMVN: the same with the statistics of the utterance itself
// (std floor 1e-5).
//
// Features: float [frames, n_mels], row-major, normalized in place.
#pragma once

#include <string>
#include <vector>

namespace mpiasr {

struct CmvnStats {
  std::vector<double> sum, sum_sq;  // [n_mels], empty before the first accumulate
  double frames = 0;

  void accumulate(const float* feats, int num_frames, int n_mels);
  // Adds other's sums to these; either side may be empty.
  void merge(const CmvnStats& other);
  // Written to path + ".tmp", then renamed, so a reader never sees half a file.
  void save(const std::string& path) const;
  // Throws Error(kBadInput) naming the file and what is wrong with it.
  static CmvnStats load(const std::string& path);
};

struct Cmvn {
  std::vector<float> mean, inv_std;  // [n_mels]

  static Cmvn from_stats(const CmvnStats& stats, float std_floor = 1e-5f);
  void apply(float* feats, int num_frames, int n_mels) const;
};

void normalize_per_utterance(float* feats, int num_frames, int n_mels);

}  // namespace mpiasr
