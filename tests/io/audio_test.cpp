// Audio decoding and resampling against signals written here with libsndfile:
// exact samples where no resampling happens, and for resampled sines the
// frequency (zero crossings, within 1%) and amplitude (RMS, within 0.5 dB).
#include "io/audio.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <fstream>
#include <iterator>
#include <numbers>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include "src/base/error.h"
#include "tests/base/temp_dir.h"

namespace mpiasr {
namespace {

// Interleaved frames of a sine of `frequency`, channel c scaled by amplitudes[c].
std::vector<float> sine(double frequency, int rate, double seconds, std::vector<float> amplitudes) {
  const int64_t frames = std::llround(seconds * rate);
  const size_t channels = amplitudes.size();
  std::vector<float> out(frames * channels);
  for (int64_t t = 0; t < frames; ++t) {
    double value = std::sin(2 * std::numbers::pi * frequency * t / rate);
    for (size_t c = 0; c < channels; ++c) out[t * channels + c] = amplitudes[c] * value;
  }
  return out;
}

// One step of 16-bit PCM: how far a sample read from a PCM file may be from
// the float that was written.
constexpr float kPcm16Step = 1.0f / 32768;

// Frequency from upward zero crossings (linearly interpolated) of x[begin, end).
double zero_crossing_frequency(const std::vector<float>& x, size_t begin, size_t end, int rate) {
  double first = -1, last = -1;
  int crossings = 0;
  for (size_t i = begin + 1; i < end; ++i) {
    if (x[i - 1] < 0 && x[i] >= 0) {
      double at = (i - 1) + x[i - 1] / (x[i - 1] - x[i]);
      if (first < 0) {
        first = at;
      } else {
        ++crossings;
      }
      last = at;
    }
  }
  return crossings * rate / (last - first);
}

double rms_amplitude(const std::vector<float>& x, size_t begin, size_t end) {
  double sum = 0;
  for (size_t i = begin; i < end; ++i) sum += double(x[i]) * x[i];
  return std::sqrt(2 * sum / (end - begin));
}

TEST(ReadAudio, Wav16kIsExact) {
  TempDir dir;
  std::vector<float> signal = sine(440, 16000, 0.5, {0.7f});
  write_audio(dir.file("f.wav"), signal, 1, 16000, SampleEncoding::kFloat32);
  EXPECT_EQ(read_audio(dir.file("f.wav")), signal);
  for (const char* name : {"p.wav", "p.flac"}) {
    write_audio(dir.file(name), signal, 1, 16000);
    std::vector<float> got = read_audio(dir.file(name));
    ASSERT_EQ(got.size(), signal.size()) << name;
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(got[i], signal[i], kPcm16Step) << name << " " << i;
  }
}

TEST(ReadAudio, StereoIsAveragedToMono) {
  TempDir dir;
  std::vector<float> left = sine(440, 16000, 0.25, {0.6f}),
                     right = sine(1234, 16000, 0.25, {-0.3f});
  std::vector<float> stereo;
  for (size_t t = 0; t < left.size(); ++t) stereo.insert(stereo.end(), {left[t], right[t]});
  write_audio(dir.file("f.wav"), stereo, 2, 16000, SampleEncoding::kFloat32);
  std::vector<float> got = read_audio(dir.file("f.wav"));
  ASSERT_EQ(got.size(), left.size());
  for (size_t t = 0; t < got.size(); ++t) ASSERT_FLOAT_EQ(got[t], (left[t] + right[t]) / 2) << t;
  write_audio(dir.file("p.flac"), stereo, 2, 16000);
  got = read_audio(dir.file("p.flac"));
  ASSERT_EQ(got.size(), left.size());
  for (size_t t = 0; t < got.size(); ++t)
    ASSERT_NEAR(got[t], (left[t] + right[t]) / 2, kPcm16Step) << t;
}

TEST(ReadAudio, NativeRateWhenSampleRateIsZero) {
  TempDir dir;
  write_audio(dir.file("a.flac"), sine(440, 44100, 0.3, {0.5f}), 1, 44100);
  EXPECT_EQ(read_audio(dir.file("a.flac"), 0, -1, 0).size(), 13230u);
}

TEST(ReadAudioInfo, ReportsTheHeader) {
  TempDir dir;
  write_audio(dir.file("a.flac"), sine(440, 44100, 0.5, {0.5f, 0.5f}), 2, 44100);
  AudioInfo info = read_audio_info(dir.file("a.flac"));
  EXPECT_EQ(info.sample_rate, 44100);
  EXPECT_EQ(info.channels, 2);
  EXPECT_EQ(info.frames, 22050);
  EXPECT_DOUBLE_EQ(info.duration, 0.5);
  EXPECT_NE(info.format.find("flac"), std::string::npos) << info.format;
  EXPECT_NE(info.format.find("16 bit"), std::string::npos) << info.format;
}

// Container, input sample rate, channels.
using Case = std::tuple<std::string, int, int>;

class Resampling : public testing::TestWithParam<Case> {};

TEST_P(Resampling, SineKeepsFrequencyAndAmplitude) {
  const auto& [extension, rate, channels] = GetParam();
  TempDir dir;
  const double frequency = 997, seconds = 1.0;
  // Stereo: channels 0.6 and 0.2 in phase average to 0.4.
  std::vector<float> amplitudes =
      channels == 1 ? std::vector<float>{0.4f} : std::vector<float>{0.6f, 0.2f};
  const std::string path = dir.file("sine." + extension);
  write_audio(path, sine(frequency, rate, seconds, amplitudes), channels, rate);

  std::vector<float> got = read_audio(path);
  EXPECT_NEAR(static_cast<double>(got.size()), seconds * 16000, 2);
  // Skip the first and last 0.1 s, where the resampling filter starts and stops.
  const size_t begin = 1600, end = got.size() - 1600;
  EXPECT_NEAR(zero_crossing_frequency(got, begin, end, 16000), frequency, 0.01 * frequency);
  double decibels = 20 * std::log10(rms_amplitude(got, begin, end) / 0.4);
  EXPECT_NEAR(decibels, 0.0, 0.5);
}

INSTANTIATE_TEST_SUITE_P(Formats, Resampling,
                         testing::Combine(testing::Values("wav", "flac", "ogg"),
                                          testing::Values(8000, 16000, 44100),
                                          testing::Values(1, 2)),
                         [](const testing::TestParamInfo<Case>& info) {
                           return std::get<0>(info.param) + "_" +
                                  std::to_string(std::get<1>(info.param)) + "Hz_" +
                                  std::to_string(std::get<2>(info.param)) + "ch";
                         });

TEST(Resampler, UpsamplingSineMatchesTheAnalyticSignal) {
  // 8 kHz -> 16 kHz: soxr is linear phase with its delay removed, so output
  // sample n is the sine at time n / 16000 (away from the edges).
  const double frequency = 500;
  std::vector<float> in = sine(frequency, 8000, 0.5, {0.5f});
  Resampler resampler(8000, 16000);
  std::vector<float> out = resampler.resample(in);
  ASSERT_EQ(out.size(), 2 * in.size());
  for (size_t n = 800; n < out.size() - 800; ++n) {
    ASSERT_NEAR(out[n], 0.5 * std::sin(2 * std::numbers::pi * frequency * n / 16000), 1e-3) << n;
  }
  // Reusable: the same input gives the same output.
  EXPECT_EQ(resampler.resample(in), out);
}

// A ramp whose every sample is distinct, so a segment's samples identify its position.
std::vector<float> ramp(int64_t frames) {
  std::vector<float> x(frames);
  for (int64_t i = 0; i < frames; ++i) x[i] = -0.9f + 1.8f * i / frames;
  return x;
}

TEST(ReadAudio, SegmentReturnsTheRightSamples) {
  TempDir dir;
  std::vector<float> signal = ramp(16000);
  write_audio(dir.file("r.wav"), signal, 1, 16000, SampleEncoding::kFloat32);
  write_audio(dir.file("r.flac"), signal, 1, 16000);
  // A float WAV holds the ramp exactly; a FLAC segment must equal the same
  // samples of the whole decoded file (its seek lands on the right frame).
  const std::vector<float> whole_flac = read_audio(dir.file("r.flac"));
  for (const auto& [name, whole] : {std::pair{"r.wav", signal}, std::pair{"r.flac", whole_flac}}) {
    std::vector<float> got = read_audio(dir.file(name), 0.25, 0.5);
    EXPECT_EQ(got, std::vector<float>(whole.begin() + 4000, whole.begin() + 12000)) << name;
    // Duration -1: from the offset to the end.
    EXPECT_EQ(read_audio(dir.file(name), 0.75),
              std::vector<float>(whole.begin() + 12000, whole.end()))
        << name;
  }
}

TEST(ReadAudio, SegmentOfAStereo8kFileIsResampled) {
  TempDir dir;
  write_audio(dir.file("s.wav"), sine(300, 8000, 2.0, {0.4f, 0.4f}), 2, 8000);
  std::vector<float> got = read_audio(dir.file("s.wav"), 0.5, 1.0);
  ASSERT_EQ(got.size(), 16000u);
  EXPECT_NEAR(zero_crossing_frequency(got, 1600, 14400, 16000), 300, 3);
}

TEST(ReadAudio, SegmentEndWithinToleranceStopsAtTheEndOfTheFile) {
  TempDir dir;
  write_audio(dir.file("a.wav"), ramp(16000), 1, 16000);
  EXPECT_EQ(read_audio(dir.file("a.wav"), 0.5, 0.53).size(), 8000u);
  EXPECT_THROW(read_audio(dir.file("a.wav"), 0.5, 0.6), Error);
  EXPECT_THROW(read_audio(dir.file("a.wav"), 1.0, -1), Error);
}

// The same bytes read from memory (libsndfile's virtual I/O) and from disk
// give the same header and the same samples, for every container.
TEST(ReadAudio, FromMemoryEqualsFromDisk) {
  TempDir dir;
  const std::vector<float> signal = sine(440, 22050, 0.3, {0.5f, 0.25f});
  for (const char* name : {"m.wav", "m.flac", "m.ogg"}) {
    write_audio(dir.file(name), signal, 2, 22050);
    std::ifstream in(dir.file(name), std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    SoundFile memory = SoundFile::from_memory(bytes, name);
    const AudioInfo info = read_audio_info(memory);
    const AudioInfo disk = read_audio_info(dir.file(name));
    EXPECT_EQ(info.frames, disk.frames) << name;
    EXPECT_EQ(info.sample_rate, 22050) << name;
    EXPECT_EQ(info.channels, 2) << name;
    EXPECT_EQ(info.format, disk.format) << name;
    EXPECT_EQ(read_audio(memory, 0.1, 0.1), read_audio(dir.file(name), 0.1, 0.1)) << name;
  }
}

// libsndfile keeps a failed open's error in one global: with threads opening
// good and corrupt files at once, every failure still reports its own error
// (a race once reported "No Error." for a malformed 'fmt ' chunk).
TEST(ReadAudio, ConcurrentOpensReportTheirOwnErrors) {
  TempDir dir;
  write_audio(dir.file("good.wav"), std::vector<float>(800, 0.1f), 1, 16000);
  std::ifstream in(dir.file("good.wav"), std::ios::binary);
  const std::string good((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::string corrupt = good;
  corrupt.replace(20, 16, std::string(16, '\xff'));  // the 'fmt ' chunk
  std::string expected;
  try {
    SoundFile::from_memory(corrupt, "corrupt.wav");
  } catch (const Error& e) {
    expected = e.what();
  }
  ASSERT_NE(expected.find("Malformed"), std::string::npos) << expected;
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 300; ++i) {
        if (t % 2 == 0) {
          (void)SoundFile::from_memory(good, "good.wav");
          continue;
        }
        try {
          SoundFile::from_memory(corrupt, "corrupt.wav");
          ++wrong;
        } catch (const Error& e) {
          if (std::string(e.what()) != expected) ++wrong;
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(wrong.load(), 0);
}

// A sample rate outside [1 kHz, 1 MHz] is a corrupt header: resampling a 1 Hz
// file to 16 kHz would allocate 16000 samples for each one stored.
TEST(ReadAudio, ImplausibleSampleRatesAreCorruptHeaders) {
  TempDir dir;
  write_audio(dir.file("r.wav"), std::vector<float>(100, 0.1f), 1, 16000);
  std::ifstream in(dir.file("r.wav"), std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  bytes.replace(24, 4, std::string("\x01\x00\x00\x00", 4));  // fmt: sample rate 1 Hz
  try {
    SoundFile::from_memory(bytes, "rate1.wav");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
    EXPECT_NE(std::string(e.what()).find(
                  "audio file 'rate1.wav': corrupt header (sample rate 1 Hz, expected 1000 to "
                  "1000000"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace mpiasr
