// Log-mel filterbank features: the 80-dim input of the acoustic model.
//
// For every frame t (frame_length samples, frame_shift apart):
//   x      = the frame's samples (see "Framing" below)
//   x     += dither * N(0, 1)                 (per frame and sample, seeded)
//   x     -= mean(x)                          (remove_dc)
//   x[i]  -= preemphasis * x[i-1], x[-1] = x[0]
//   x     *= window                           (hann, povey = hann^0.85, hamming)
//   P[k]   = |rfft(x zero-padded to n_fft)[k]|^2,   k = 0 .. n_fft/2
//   out[t, m] = log(max(sum_k W[m, k] P[k], log_floor))
// The log floor keeps silence finite: log(1e-10) = -23.03 by default,
// log(FLT_EPSILON) = -15.94 in the Kaldi preset.
//
// Framing:
//   snip_edges = true   frames lie inside the signal: 1 + (n - L) / S frames
//                       (0 when n < L), frame t = x[t*S, t*S + L)  (Kaldi's default)
//   snip_edges = false  frames are centred on t*S as torch.stft(center=True,
//                       pad_mode="reflect") does: 1 + n / S frames, frame t =
//                       x[t*S - n_fft/2 + (n_fft - L)/2, ... + L) with indices
//                       outside the signal reflected without repeating the edge
//                       (x[-1] = x[1]); torchaudio's MelSpectrogram convention.
//                       With kaldi_compat it is Kaldi's instead: (n + S/2) / S
//                       frames, frame t starts at t*S + S/2 - L/2, reflection
//                       repeats the edge (x[-1] = x[0]).
//   An empty signal has no frames.
//
// Mel filters W [n_mels, n_fft/2 + 1], mel(f) = 1127 ln(1 + f/700) (HTK):
//   default       torchaudio.functional.melscale_fbanks(norm=None, mel_scale="htk"):
//                 n_mels + 2 edges equally spaced in mel between low_freq and
//                 high_freq, triangles linear in Hz over all n_fft/2 + 1 bins.
//   kaldi_compat  Kaldi's MelBanks: triangles linear in mel, strictly inside
//                 their edges, the Nyquist bin excluded.
//
// Windows are periodic (denominator L, torch.hann_window's default) unless
// kaldi_compat, where they are symmetric (denominator L - 1) as in Kaldi.
//
// Output layout: float [num_frames, n_mels], row-major.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace mpiasr {

struct FbankOptions {
  int sample_rate = 16000;
  int n_mels = 80;
  double frame_length_ms = 25, frame_shift_ms = 10;
  int n_fft = 512;              // even, >= the frame length in samples
  std::string window = "hann";  // hann, povey, hamming
  double preemphasis = 0;       // 0 = off; Kaldi uses 0.97
  bool remove_dc = false;       // subtract each frame's mean before pre-emphasis
  double dither = 0;            // standard deviation of the added Gaussian noise
  bool snip_edges = false;
  double low_freq = 0, high_freq = 0;  // Hz; high_freq <= 0 means nyquist + high_freq
  double log_floor = 1e-10;            // energies below it are clamped before the log
  bool kaldi_compat = false;           // Kaldi's windows, mel banks and snip_edges=false framing

  // Kaldi compute-fbank / torchaudio.compliance.kaldi.fbank with
  // num_mel_bins=80, dither 0 (the Kaldi tool's default is 1): snip_edges,
  // povey window, pre-emphasis 0.97, DC removal, low_freq 20 Hz, log floor FLT_EPSILON.
  static FbankOptions kaldi();
};

class Fbank {
 public:
  // Validates the options (throws Error naming the bad value) and builds the
  // window and the mel filters.
  explicit Fbank(const FbankOptions& options);

  int num_frames(size_t num_samples) const;

  // samples: num_samples floats at options().sample_rate; out: num_frames x n_mels.
  // Thread-safe: concurrent calls on one Fbank share nothing mutable. The
  // dither noise depends only on dither_seed, the frame and the sample index.
  void compute(const float* samples, size_t num_samples, float* out,
               uint64_t dither_seed = 0) const;

  // Frames [first_frame, first_frame + count) of a signal of `signal_size`
  // samples of which `held` holds samples [held_first, held_first +
  // held_size): exactly those rows of compute() on the whole signal, for a
  // caller that holds a window of a long signal. Every sample the frames
  // read, reflected ones included, must be held (checked): frame t reads
  // samples of [frame_start(t), frame_start(t) + frame_length()), reflected
  // into the signal at its edges (so up to n_fft / 2 + 1 samples from the
  // start, and the last n_fft + 1 where a frame crosses the end).
  void compute_frames(const float* held, long held_first, size_t held_size, size_t signal_size,
                      int first_frame, int count, float* out, uint64_t dither_seed = 0) const;

  const FbankOptions& options() const { return options_; }
  int frame_length() const { return frame_length_; }  // samples
  int frame_shift() const { return frame_shift_; }    // samples
  // First sample of frame t, possibly negative (outside the signal).
  long frame_start(int t) const;

 private:
  FbankOptions options_;
  int frame_length_ = 0;
  int frame_shift_ = 0;
  std::vector<float> window_;  // [frame_length]
  // Mel filter m has weights filter_weights_[filter_offset_[m] + j] on power
  // bins filter_first_bin_[m] + j, j < filter_offset_[m + 1] - filter_offset_[m].
  std::vector<int> filter_first_bin_;
  std::vector<int> filter_offset_;
  std::vector<float> filter_weights_;
};

}  // namespace mpiasr
