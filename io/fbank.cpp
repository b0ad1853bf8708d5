// Log-mel filterbank (see fbank.h for the math, the framing and the layout).
//
// FFT library: the real FFT is kissfft's kiss_fftr (BSD-3-Clause). FFTW
// (GPL-2+) is faster; io/bench/fbank_bench measured, on this project's
// machine (AMD EPYC Zen 5, 2 cores shared with parallel builds, so the minimum
// CPU time of 15 repetitions; one thread; Debian kissfft 131.1.0, FFTW 3.3.10
// with FFTW_MEASURE):
//   512-point real FFT     kissfft 2.3 us     FFTW 0.40 us (5.8x faster)
//   log-mel, 10 s of audio default 3.2 ms = 3100x real time per core (3.2 us/frame)
//                          Kaldi   3.7 ms = 2700x real time per core
//                          Kaldi with dither 1: 11.6 ms = 860x (Gaussian draws)
// So the FFT is ~70% of the log-mel time and FFTW would make it ~2.5x faster.
// We keep kissfft anyway: linking FFTW would make the mpiasr program GPL, and
// one loader core at ~3000x real time already feeds far more audio than a
// training step consumes (the CPU trainer's ~100 audio-seconds/s is 3% of a
// core; eight loader threads of a GPU rank give ~25000x real time).
//
// Scaling of mel(f): the filters only depend on ratios of mel differences, so
// 1127 ln(1 + f/700) (Kaldi) and 2595 log10(1 + f/700) (torchaudio) give the
// same filters.
#include "io/fbank.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <numbers>

#include <kiss_fftr.h>

#include "src/base/error.h"
#include "src/base/rng.h"

namespace mpiasr {

namespace {

double hz_to_mel(double hz) {
  return 1127.0 * std::log(1.0 + hz / 700.0);
}
double mel_to_hz(double mel) {
  return 700.0 * (std::exp(mel / 1127.0) - 1.0);
}

// Reflection without repeating the edge (torch "reflect"): x[-1] = x[1], x[n] = x[n-2].
size_t reflect_exclusive(long i, size_t n) {
  if (n == 1) return 0;
  const long period = 2 * (static_cast<long>(n) - 1);
  long r = i % period;
  if (r < 0) r += period;
  return static_cast<size_t>(r < static_cast<long>(n) ? r : period - r);
}

// Reflection repeating the edge (Kaldi): x[-1] = x[0], x[n] = x[n-1].
size_t reflect_inclusive(long i, size_t n) {
  const long period = 2 * static_cast<long>(n);
  long r = i % period;
  if (r < 0) r += period;
  return static_cast<size_t>(r < static_cast<long>(n) ? r : period - 1 - r);
}

// Adds dither * N(0, 1) to frame[0..length), Box-Muller on a splitmix64
// stream keyed by (seed, frame index): the noise of a frame does not depend
// on which thread computes it or on the frames before it.
void add_dither(float* frame, int length, double dither, uint64_t seed, int frame_index) {
  SplitMix64 rng(seed ^ (0xD1B54A32D192ED03ull * (static_cast<uint64_t>(frame_index) + 1)));
  rng.next();
  const double two_pi = 2.0 * std::numbers::pi;
  for (int i = 0; i < length; i += 2) {
    const double u1 = static_cast<double>((rng.next() >> 11) + 1) * 0x1.0p-53;  // (0, 1]
    const double u2 = unit_double(rng.next());                                  // [0, 1)
    const double radius = dither * std::sqrt(-2.0 * std::log(u1));
    frame[i] += static_cast<float>(radius * std::cos(two_pi * u2));
    if (i + 1 < length) frame[i + 1] += static_cast<float>(radius * std::sin(two_pi * u2));
  }
}

struct KissFftrFree {
  void operator()(kiss_fftr_state* state) const { kiss_fftr_free(state); }
};
using KissFftr = std::unique_ptr<kiss_fftr_state, KissFftrFree>;

// kiss_fftr writes scratch into its state, so each thread keeps its own,
// rebuilt only when the FFT size changes.
kiss_fftr_state* thread_fftr(int n_fft) {
  thread_local int cached_size = 0;
  thread_local KissFftr cached;
  if (cached_size != n_fft) {
    cached.reset(kiss_fftr_alloc(n_fft, 0, nullptr, nullptr));
    MPIASR_CHECK(cached, "kiss_fftr_alloc(" << n_fft << ") failed");
    cached_size = n_fft;
  }
  return cached.get();
}

std::vector<float> make_window(const std::string& name, int length, bool symmetric) {
  const double denominator = symmetric ? length - 1 : length;
  const double step = 2.0 * std::numbers::pi / denominator;
  std::vector<float> window(length);
  for (int i = 0; i < length; ++i) {
    const double hann = 0.5 - 0.5 * std::cos(step * i);
    if (name == "hann") {
      window[i] = static_cast<float>(hann);
    } else if (name == "povey") {
      window[i] = static_cast<float>(std::pow(hann, 0.85));
    } else {
      window[i] = static_cast<float>(0.54 - 0.46 * std::cos(step * i));
    }
  }
  return window;
}

}  // namespace

FbankOptions FbankOptions::kaldi() {
  FbankOptions options;
  options.window = "povey";
  options.preemphasis = 0.97;
  options.remove_dc = true;
  options.snip_edges = true;
  options.low_freq = 20;
  options.log_floor = 1.1920928955078125e-07;  // FLT_EPSILON
  options.kaldi_compat = true;
  return options;
}

Fbank::Fbank(const FbankOptions& options) : options_(options) {
  const FbankOptions& o = options_;
  if (o.sample_rate <= 0) MPIASR_FAIL(ExitCode::kUsage, "fbank: sample_rate " << o.sample_rate);
  if (o.n_mels <= 0) MPIASR_FAIL(ExitCode::kUsage, "fbank: n_mels " << o.n_mels);
  frame_length_ = static_cast<int>(std::lround(o.sample_rate * o.frame_length_ms / 1000.0));
  frame_shift_ = static_cast<int>(std::lround(o.sample_rate * o.frame_shift_ms / 1000.0));
  if (frame_length_ < 2)
    MPIASR_FAIL(ExitCode::kUsage, "fbank: frame_length_ms " << o.frame_length_ms << " gives "
                                                            << frame_length_ << " samples");
  if (frame_shift_ < 1)
    MPIASR_FAIL(ExitCode::kUsage, "fbank: frame_shift_ms " << o.frame_shift_ms << " gives "
                                                           << frame_shift_ << " samples");
  if (o.n_fft < frame_length_ || o.n_fft % 2 != 0)
    MPIASR_FAIL(ExitCode::kUsage, "fbank: n_fft " << o.n_fft << " must be even and >= the frame "
                                                  << "length of " << frame_length_ << " samples");
  if (o.window != "hann" && o.window != "povey" && o.window != "hamming")
    MPIASR_FAIL(ExitCode::kUsage,
                "fbank: unknown window '" << o.window << "' (expected hann, povey or hamming)");
  if (!(o.preemphasis >= 0 && o.preemphasis <= 1))
    MPIASR_FAIL(ExitCode::kUsage, "fbank: preemphasis " << o.preemphasis << " not in [0, 1]");
  if (!(o.dither >= 0)) MPIASR_FAIL(ExitCode::kUsage, "fbank: dither " << o.dither);
  if (!(o.log_floor > 0)) MPIASR_FAIL(ExitCode::kUsage, "fbank: log_floor " << o.log_floor);
  const double nyquist = 0.5 * o.sample_rate;
  const double high_freq = o.high_freq > 0 ? o.high_freq : nyquist + o.high_freq;
  if (!(o.low_freq >= 0 && o.low_freq < high_freq && high_freq <= nyquist))
    MPIASR_FAIL(ExitCode::kUsage, "fbank: need 0 <= low_freq < high_freq <= "
                                      << nyquist << " Hz, got low_freq " << o.low_freq
                                      << ", high_freq " << o.high_freq << " (= " << high_freq
                                      << " Hz)");

  window_ = make_window(o.window, frame_length_, o.kaldi_compat);

  // Mel filters, computed in double, kept as the non-zero span of each.
  const int n_bins = o.n_fft / 2 + 1;
  const double bin_hz = static_cast<double>(o.sample_rate) / o.n_fft;
  const double mel_low = hz_to_mel(o.low_freq);
  const double mel_step = (hz_to_mel(high_freq) - mel_low) / (o.n_mels + 1);
  filter_offset_.push_back(0);
  for (int m = 0; m < o.n_mels; ++m) {
    const double left_mel = mel_low + m * mel_step;
    const double center_mel = left_mel + mel_step;
    const double right_mel = center_mel + mel_step;
    const double left_hz = mel_to_hz(left_mel);
    const double center_hz = mel_to_hz(center_mel);
    const double right_hz = mel_to_hz(right_mel);
    std::vector<double> weights(n_bins, 0.0);
    for (int k = 0; k < n_bins; ++k) {
      if (o.kaldi_compat) {
        const double mel = hz_to_mel(k * bin_hz);
        if (k == n_bins - 1 || mel <= left_mel || mel >= right_mel) continue;
        weights[k] = mel <= center_mel ? (mel - left_mel) / (center_mel - left_mel)
                                       : (right_mel - mel) / (right_mel - center_mel);
      } else {
        const double hz = k * bin_hz;
        const double rising = (hz - left_hz) / (center_hz - left_hz);
        const double falling = (right_hz - hz) / (right_hz - center_hz);
        weights[k] = std::max(0.0, std::min(rising, falling));
      }
    }
    int first = 0;
    while (first < n_bins && weights[first] == 0) ++first;
    int last = n_bins - 1;
    while (last >= first && weights[last] == 0) --last;
    if (first > last)
      MPIASR_FAIL(ExitCode::kUsage, "fbank: mel filter "
                                        << m << " of " << o.n_mels << " (" << left_hz << " to "
                                        << right_hz << " Hz) covers no FFT bin of n_fft " << o.n_fft
                                        << "; use fewer mels");
    filter_first_bin_.push_back(first);
    for (int k = first; k <= last; ++k) filter_weights_.push_back(static_cast<float>(weights[k]));
    filter_offset_.push_back(static_cast<int>(filter_weights_.size()));
  }
}

int Fbank::num_frames(size_t num_samples) const {
  const long n = static_cast<long>(num_samples);
  if (n == 0) return 0;
  if (options_.snip_edges) return n < frame_length_ ? 0 : 1 + (n - frame_length_) / frame_shift_;
  if (options_.kaldi_compat) return (n + frame_shift_ / 2) / frame_shift_;
  return 1 + n / frame_shift_;
}

long Fbank::frame_start(int t) const {
  const long center = static_cast<long>(t) * frame_shift_;
  if (options_.snip_edges) return center;
  if (options_.kaldi_compat) return center + frame_shift_ / 2 - frame_length_ / 2;
  return center - options_.n_fft / 2 + (options_.n_fft - frame_length_) / 2;
}

void Fbank::compute(const float* samples, size_t num_samples, float* out,
                    uint64_t dither_seed) const {
  compute_frames(samples, 0, num_samples, num_samples, 0, num_frames(num_samples), out,
                 dither_seed);
}

void Fbank::compute_frames(const float* held, long held_first, size_t held_size, size_t signal_size,
                           int first_frame, int count, float* out, uint64_t dither_seed) const {
  if (count == 0) return;
  const FbankOptions& o = options_;
  const int length = frame_length_;
  const int n_bins = o.n_fft / 2 + 1;
  const long n = static_cast<long>(signal_size);
  const long held_end = held_first + static_cast<long>(held_size);
  auto check_held = [&](int t, long first, long last) {
    MPIASR_CHECK(first >= held_first && last < held_end,
                 "fbank: frame " << t << " reads samples " << first << " to " << last
                                 << ", outside the " << held_size << " held from " << held_first
                                 << " of a signal of " << signal_size);
  };
  const float preemphasis = static_cast<float>(o.preemphasis);
  const float log_floor = static_cast<float>(o.log_floor);
  kiss_fftr_state* fft = thread_fftr(o.n_fft);
  std::vector<float> frame(o.n_fft, 0.0f);  // frame[length..n_fft) stays 0
  std::vector<kiss_fft_cpx> spectrum(n_bins);
  std::vector<float> power(n_bins);

  for (int t = first_frame; t < first_frame + count; ++t) {
    const long start = frame_start(t);
    if (start >= 0 && start + length <= n) {
      check_held(t, start, start + length - 1);
      std::memcpy(frame.data(), held + (start - held_first), sizeof(float) * length);
    } else {
      for (int i = 0; i < length; ++i) {
        const long j =
            static_cast<long>(o.kaldi_compat ? reflect_inclusive(start + i, signal_size)
                                             : reflect_exclusive(start + i, signal_size));
        check_held(t, j, j);
        frame[i] = held[j - held_first];
      }
    }
    if (o.dither > 0) add_dither(frame.data(), length, o.dither, dither_seed, t);
    if (o.remove_dc) {
      float sum = 0;
      for (int i = 0; i < length; ++i) sum += frame[i];
      const float mean = sum / length;
      for (int i = 0; i < length; ++i) frame[i] -= mean;
    }
    if (preemphasis != 0) {
      for (int i = length - 1; i > 0; --i) frame[i] -= preemphasis * frame[i - 1];
      frame[0] -= preemphasis * frame[0];
    }
    for (int i = 0; i < length; ++i) frame[i] *= window_[i];

    kiss_fftr(fft, frame.data(), spectrum.data());
    for (int k = 0; k < n_bins; ++k)
      power[k] = spectrum[k].r * spectrum[k].r + spectrum[k].i * spectrum[k].i;

    float* row = out + static_cast<size_t>(t - first_frame) * o.n_mels;
    for (int m = 0; m < o.n_mels; ++m) {
      const float* weights = filter_weights_.data() + filter_offset_[m];
      const float* bins = power.data() + filter_first_bin_[m];
      const int span = filter_offset_[m + 1] - filter_offset_[m];
      float energy = 0;
      for (int j = 0; j < span; ++j) energy += weights[j] * bins[j];
      row[m] = std::log(std::max(energy, log_floor));
    }
  }
}

}  // namespace mpiasr
