// Log-mel features against float64 references written here from the published
// algorithms: torchaudio's MelSpectrogram (torch.stft center=True, reflect
// padding, window centred in n_fft, melscale_fbanks) by direct DFT, and
// Kaldi's compute-fbank (ProcessWindow, MelBanks) by direct DFT; frame counts,
// dither statistics and determinism, thread safety, option errors.
#include "io/fbank.h"

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <numbers>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "src/base/error.h"

namespace mpiasr {
namespace {

constexpr double kPi = std::numbers::pi;

// A test signal: noise, two tones and a chirp, scaled by `scale`.
std::vector<float> test_signal(size_t n, double scale, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> noise(-0.05, 0.05);
  std::vector<float> x(n);
  for (size_t i = 0; i < n; ++i) {
    const double t = i / 16000.0;
    const double v = noise(rng) + 0.4 * std::sin(2 * kPi * 440 * t) +
                     0.2 * std::sin(2 * kPi * 3100 * t + 1) +
                     0.1 * std::sin(2 * kPi * 2000 * t * t);
    x[i] = static_cast<float>(scale * v);
  }
  return x;
}

// Power spectrum |DFT(frame)|^2, bins 0..n/2, in double.
std::vector<double> power_spectrum(const std::vector<double>& frame) {
  const size_t n = frame.size();
  std::vector<double> cos_table(n), sin_table(n);
  for (size_t j = 0; j < n; ++j) {
    cos_table[j] = std::cos(2 * kPi * j / n);
    sin_table[j] = std::sin(2 * kPi * j / n);
  }
  std::vector<double> power(n / 2 + 1);
  for (size_t k = 0; k <= n / 2; ++k) {
    double re = 0, im = 0;
    for (size_t j = 0; j < n; ++j) {
      re += frame[j] * cos_table[(j * k) % n];
      im -= frame[j] * sin_table[(j * k) % n];
    }
    power[k] = re * re + im * im;
  }
  return power;
}

double htk_mel(double hz) {
  return 2595.0 * std::log10(1.0 + hz / 700.0);
}
double htk_hz(double mel) {
  return 700.0 * (std::pow(10.0, mel / 2595.0) - 1.0);
}

// torchaudio.transforms.MelSpectrogram(sample_rate=16000, n_fft=512,
// win_length=400, hop_length=160, n_mels, power=2, center=True,
// pad_mode="reflect", window_fn=hann (periodic) or hamming (periodic)), then
// log(max(x, 1e-10)). Output [frames][n_mels].
std::vector<std::vector<double>> torchaudio_log_mel(const std::vector<float>& x, int n_mels,
                                                    bool hamming) {
  const int n_fft = 512, hop = 160, win = 400;
  const long n = static_cast<long>(x.size());
  // torch.nn.functional.pad(mode="reflect") by n_fft / 2 on both sides.
  std::vector<double> padded;
  for (long p = -n_fft / 2; p < n + n_fft / 2; ++p) {
    long i = p < 0 ? -p : p;
    if (i >= n) i = 2 * (n - 1) - i;
    padded.push_back(x[i]);
  }
  // torch.stft pads the window to n_fft, centred.
  std::vector<double> window(n_fft, 0.0);
  for (int i = 0; i < win; ++i)
    window[(n_fft - win) / 2 + i] = hamming ? 0.54 - 0.46 * std::cos(2 * kPi * i / win)
                                            : 0.5 - 0.5 * std::cos(2 * kPi * i / win);
  // torchaudio.functional.melscale_fbanks(257, 0, 8000, n_mels, 16000, None, "htk").
  std::vector<double> f_pts(n_mels + 2);
  for (int j = 0; j < n_mels + 2; ++j) f_pts[j] = htk_hz(htk_mel(8000.0) * j / (n_mels + 1));
  const int frames = 1 + static_cast<int>((padded.size() - n_fft) / hop);
  std::vector<std::vector<double>> out(frames, std::vector<double>(n_mels));
  for (int t = 0; t < frames; ++t) {
    std::vector<double> frame(n_fft);
    for (int j = 0; j < n_fft; ++j) frame[j] = padded[t * hop + j] * window[j];
    const std::vector<double> power = power_spectrum(frame);
    for (int m = 0; m < n_mels; ++m) {
      double energy = 0;
      for (int k = 0; k <= n_fft / 2; ++k) {
        const double f = 8000.0 * k / (n_fft / 2);
        const double down = (f - f_pts[m]) / (f_pts[m + 1] - f_pts[m]);
        const double up = (f_pts[m + 2] - f) / (f_pts[m + 2] - f_pts[m + 1]);
        energy += std::max(0.0, std::min(down, up)) * power[k];
      }
      out[t][m] = std::log(std::max(energy, 1e-10));
    }
  }
  return out;
}

// Kaldi compute-fbank with --dither=0 --num-mel-bins=n_mels --window-type=window
// and the other options at Kaldi's defaults (16 kHz, 25/10 ms, preemph 0.97,
// remove DC, round to 512, low_freq 20, high_freq nyquist, use_energy false),
// following feature-window.cc (ExtractWindow, ProcessWindow) and mel-computations.cc.
std::vector<std::vector<double>> kaldi_fbank(const std::vector<float>& x, int n_mels,
                                             const std::string& window_type, bool snip_edges) {
  const long n = static_cast<long>(x.size());
  const int length = 400, shift = 160, padded = 512;
  const long frames =
      snip_edges ? (n < length ? 0 : 1 + (n - length) / shift) : (n + shift / 2) / shift;
  // FeatureWindowFunction.
  std::vector<double> window(length);
  const double a = 2 * kPi / (length - 1);
  for (int i = 0; i < length; ++i) {
    if (window_type == "hanning") window[i] = 0.5 - 0.5 * std::cos(a * i);
    if (window_type == "hamming") window[i] = 0.54 - 0.46 * std::cos(a * i);
    if (window_type == "povey") window[i] = std::pow(0.5 - 0.5 * std::cos(a * i), 0.85);
  }
  // MelBanks.
  const double mel_low = 1127.0 * std::log(1.0 + 20.0 / 700.0);
  const double mel_high = 1127.0 * std::log(1.0 + 8000.0 / 700.0);
  const double delta = (mel_high - mel_low) / (n_mels + 1);
  std::vector<std::vector<double>> banks(n_mels, std::vector<double>(padded / 2 + 1, 0.0));
  for (int m = 0; m < n_mels; ++m) {
    const double left = mel_low + m * delta, center = left + delta, right = center + delta;
    for (int i = 0; i < padded / 2; ++i) {
      const double mel = 1127.0 * std::log(1.0 + (16000.0 / padded) * i / 700.0);
      if (mel > left && mel < right)
        banks[m][i] =
            mel <= center ? (mel - left) / (center - left) : (right - mel) / (right - center);
    }
  }
  std::vector<std::vector<double>> out(frames, std::vector<double>(n_mels));
  for (long t = 0; t < frames; ++t) {
    // ExtractWindow: FirstSampleOfFrame, reflection s -> -s - 1, s -> 2n - 1 - s.
    const long first = snip_edges ? t * shift : t * shift + shift / 2 - length / 2;
    std::vector<double> frame(padded, 0.0);
    for (int i = 0; i < length; ++i) {
      long s = first + i;
      while (s < 0 || s >= n) s = s < 0 ? -s - 1 : 2 * n - 1 - s;
      frame[i] = x[s];
    }
    double sum = 0;
    for (int i = 0; i < length; ++i) sum += frame[i];
    for (int i = 0; i < length; ++i) frame[i] -= sum / length;
    for (int i = length - 1; i > 0; --i) frame[i] -= 0.97 * frame[i - 1];
    frame[0] -= 0.97 * frame[0];
    for (int i = 0; i < length; ++i) frame[i] *= window[i];
    const std::vector<double> power = power_spectrum(frame);
    for (int m = 0; m < n_mels; ++m) {
      double energy = 0;
      for (int k = 0; k <= padded / 2; ++k) energy += banks[m][k] * power[k];
      out[t][m] = std::log(std::max(energy, static_cast<double>(FLT_EPSILON)));
    }
  }
  return out;
}

// Relative error of the log values below 1e-4 (with |log| < 1 compared
// absolutely) for mel energies within 40 dB of the frame's strongest one.
// Weaker ones carry the float32 FFT's rounding, about 1e-7 of the frame's
// energy (Kaldi and torchaudio compute in float32 too): 2e-3 for them.
void expect_matches(const Fbank& fbank, const std::vector<float>& x,
                    const std::vector<std::vector<double>>& reference) {
  const int n_mels = fbank.options().n_mels;
  ASSERT_EQ(fbank.num_frames(x.size()), static_cast<int>(reference.size()));
  std::vector<float> out(reference.size() * n_mels);
  fbank.compute(x.data(), x.size(), out.data());
  double worst_strong = 0, worst_weak = 0;
  size_t strong = 0;
  for (size_t t = 0; t < reference.size(); ++t) {
    const double strongest = *std::max_element(reference[t].begin(), reference[t].end());
    for (int m = 0; m < n_mels; ++m) {
      const double expected = reference[t][m];
      ASSERT_GT(expected, std::log(fbank.options().log_floor) + 1) << "signal too weak";
      const double error =
          std::abs(out[t * n_mels + m] - expected) / std::max(1.0, std::abs(expected));
      if (expected > strongest - std::log(1e4)) {
        worst_strong = std::max(worst_strong, error);
        ++strong;
      } else {
        worst_weak = std::max(worst_weak, error);
      }
    }
  }
  EXPECT_LT(worst_strong, 1e-4);
  EXPECT_LT(worst_weak, 2e-3);
  EXPECT_GT(strong, reference.size() * n_mels / 2);
}

TEST(Fbank, MatchesTorchaudioMelSpectrogram) {
  const std::vector<float> x = test_signal(16000 + 37, 1.0, 1);
  FbankOptions options;
  EXPECT_NO_FATAL_FAILURE(expect_matches(Fbank(options), x, torchaudio_log_mel(x, 80, false)));
  options.window = "hamming";
  options.n_mels = 40;
  EXPECT_NO_FATAL_FAILURE(expect_matches(Fbank(options), x, torchaudio_log_mel(x, 40, true)));
}

TEST(Fbank, MatchesKaldiComputeFbank) {
  const std::vector<float> x = test_signal(16000 + 37, 32768.0, 2);
  FbankOptions options = FbankOptions::kaldi();
  EXPECT_NO_FATAL_FAILURE(expect_matches(Fbank(options), x, kaldi_fbank(x, 80, "povey", true)));
  options.snip_edges = false;
  EXPECT_NO_FATAL_FAILURE(expect_matches(Fbank(options), x, kaldi_fbank(x, 80, "povey", false)));
  options.window = "hann";
  options.n_mels = 23;
  EXPECT_NO_FATAL_FAILURE(expect_matches(Fbank(options), x, kaldi_fbank(x, 23, "hanning", false)));
  options.window = "hamming";
  options.snip_edges = true;
  EXPECT_NO_FATAL_FAILURE(expect_matches(Fbank(options), x, kaldi_fbank(x, 23, "hamming", true)));
}

TEST(Fbank, FrameCounts) {
  const Fbank centred{FbankOptions{}};
  EXPECT_EQ(centred.frame_length(), 400);
  EXPECT_EQ(centred.frame_shift(), 160);
  for (size_t n : {1, 159, 160, 399, 16000, 16159, 16160})
    EXPECT_EQ(centred.num_frames(n), static_cast<int>(1 + n / 160)) << n;
  EXPECT_EQ(centred.num_frames(0), 0);

  // Kaldi: one second at 16 kHz gives 98 frames with snip_edges, 100 without.
  FbankOptions kaldi_options = FbankOptions::kaldi();
  const Fbank kaldi(kaldi_options);
  EXPECT_EQ(kaldi.num_frames(16000), 98);
  EXPECT_EQ(kaldi.num_frames(399), 0);
  EXPECT_EQ(kaldi.num_frames(400), 1);
  EXPECT_EQ(kaldi.num_frames(559), 1);
  EXPECT_EQ(kaldi.num_frames(560), 2);
  kaldi_options.snip_edges = false;
  const Fbank kaldi_unsnipped(kaldi_options);
  EXPECT_EQ(kaldi_unsnipped.num_frames(16000), 100);
  EXPECT_EQ(kaldi_unsnipped.num_frames(79), 0);
  EXPECT_EQ(kaldi_unsnipped.num_frames(80), 1);
  EXPECT_EQ(kaldi_unsnipped.num_frames(239), 1);
  EXPECT_EQ(kaldi_unsnipped.num_frames(240), 2);
}

TEST(Fbank, ShortSignalsReflectSeveralTimes) {
  // Shorter than half a frame: reflection wraps more than once; values stay finite.
  const Fbank fbank{FbankOptions{}};
  for (size_t n : {1, 2, 50, 199}) {
    const std::vector<float> x = test_signal(n, 1.0, 3);
    std::vector<float> out(fbank.num_frames(n) * 80);
    fbank.compute(x.data(), n, out.data());
    for (float v : out) ASSERT_TRUE(std::isfinite(v)) << n;
  }
}

TEST(Fbank, ToneLandsInItsMelBin) {
  const Fbank fbank{FbankOptions{}};
  const double mel_step = htk_mel(8000.0) / 81;
  for (int m : {10, 30, 60}) {
    const double hz = htk_hz((m + 1) * mel_step);  // centre of filter m
    std::vector<float> x(8000);
    for (size_t i = 0; i < x.size(); ++i)
      x[i] = static_cast<float>(std::sin(2 * kPi * hz * i / 16000));
    std::vector<float> out(fbank.num_frames(x.size()) * 80);
    fbank.compute(x.data(), x.size(), out.data());
    const float* row = out.data() + 20 * 80;
    EXPECT_EQ(std::max_element(row, row + 80) - row, m) << hz << " Hz";
  }
}

TEST(Fbank, DitherIsSeededGaussianNoise) {
  FbankOptions options;
  options.dither = 0.5;
  const Fbank fbank(options);
  const std::vector<float> zeros(20 * 16000, 0.0f);
  const int frames = fbank.num_frames(zeros.size());
  std::vector<float> a(frames * 80), b(frames * 80), c(frames * 80);
  fbank.compute(zeros.data(), zeros.size(), a.data(), 7);
  fbank.compute(zeros.data(), zeros.size(), b.data(), 7);
  fbank.compute(zeros.data(), zeros.size(), c.data(), 8);
  EXPECT_EQ(a, b);
  EXPECT_NE(a, c);

  // White noise of variance s^2 through window w: E|X_k|^2 = s^2 sum_i w_i^2
  // in every bin, so E[mel energy m] = s^2 sum_i w_i^2 sum_k W[m, k].
  double window_energy = 0;
  for (int i = 0; i < 400; ++i)
    window_energy += std::pow(0.5 - 0.5 * std::cos(2 * kPi * i / 400), 2);
  const double mel_step = htk_mel(8000.0) / 81;
  for (int m = 0; m < 80; ++m) {
    double filter_sum = 0;
    for (int k = 0; k <= 256; ++k) {
      const double f = 31.25 * k, l = htk_hz(m * mel_step), cen = htk_hz((m + 1) * mel_step),
                   r = htk_hz((m + 2) * mel_step);
      filter_sum += std::max(0.0, std::min((f - l) / (cen - l), (r - f) / (r - cen)));
    }
    double mean_energy = 0;
    for (int t = 0; t < frames; ++t) mean_energy += std::exp(a[t * 80 + m]) / frames;
    EXPECT_NEAR(mean_energy / (0.25 * window_energy * filter_sum), 1.0, 0.1) << "mel bin " << m;
  }

  // Without dither the seed changes nothing.
  const Fbank plain{FbankOptions{}};
  const std::vector<float> x = test_signal(4000, 1.0, 4);
  std::vector<float> d(plain.num_frames(x.size()) * 80), e(d.size());
  plain.compute(x.data(), x.size(), d.data(), 1);
  plain.compute(x.data(), x.size(), e.data(), 2);
  EXPECT_EQ(d, e);
}

TEST(Fbank, ConcurrentCallsMatchSerialOnes) {
  FbankOptions options = FbankOptions::kaldi();
  options.dither = 1.0;
  const Fbank fbank(options);
  const std::vector<float> x = test_signal(3 * 16000, 32768.0, 5);
  const size_t size = fbank.num_frames(x.size()) * 80;
  std::vector<std::vector<float>> serial(4, std::vector<float>(size)), threaded = serial;
  for (int i = 0; i < 4; ++i) fbank.compute(x.data(), x.size(), serial[i].data(), i);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      for (int repeat = 0; repeat < 5; ++repeat)
        fbank.compute(x.data(), x.size(), threaded[i].data(), i);
    });
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(serial, threaded);
}

void expect_rejected(const FbankOptions& options, const std::string& mention) {
  try {
    Fbank fbank(options);
    ADD_FAILURE() << "accepted options that should mention " << mention;
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kUsage);
    EXPECT_NE(std::string(e.what()).find(mention), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("fbank.cpp:"), std::string::npos) << e.what();
  }
}

TEST(Fbank, RejectsBadOptions) {
  FbankOptions options;
  options.window = "blackmann";
  expect_rejected(options, "'blackmann'");
  options = {};
  options.n_fft = 256;
  expect_rejected(options, "n_fft 256");
  options = {};
  options.low_freq = 9000;
  expect_rejected(options, "low_freq 9000");
  options = {};
  options.high_freq = -9000;
  expect_rejected(options, "-1000 Hz");
  options = {};
  options.n_mels = 200;
  expect_rejected(options, "covers no FFT bin");
  options = {};
  options.log_floor = 0;
  expect_rejected(options, "log_floor 0");
}

}  // namespace
}  // namespace mpiasr
