// Audio decoding (libsndfile), downmix to mono, segments and resampling (soxr).
// See audio.h for the math.
#include "io/audio.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>

#include "src/base/error.h"

namespace mpiasr {
namespace {

// Frames read per libsndfile call when downmixing.
constexpr int64_t kChunkFrames = 16384;

std::string format_name(int format) {
  SF_FORMAT_INFO major{};
  major.format = format & SF_FORMAT_TYPEMASK;
  SF_FORMAT_INFO subtype{};
  subtype.format = format & SF_FORMAT_SUBMASK;
  std::string name = sf_command(nullptr, SFC_GET_FORMAT_INFO, &major, sizeof(major)) == 0
                         ? major.extension
                         : "unknown";
  if (sf_command(nullptr, SFC_GET_FORMAT_INFO, &subtype, sizeof(subtype)) == 0) {
    name += std::string(" ") + subtype.name;
  }
  return name;
}

// Index of the first NaN or infinite value in x[0, n), or -1. The common case
// (all finite) is one branch-free pass.
int64_t first_non_finite(const float* x, int64_t n) {
  bool finite = true;
  for (int64_t i = 0; i < n; ++i) finite &= std::abs(x[i]) <= std::numeric_limits<float>::max();
  if (finite) return -1;
  for (int64_t i = 0; i < n; ++i) {
    if (!std::isfinite(x[i])) return i;
  }
  return -1;
}

int container_for(const std::string& path) {
  std::string ext = std::filesystem::path(path).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  if (ext == ".wav") return SF_FORMAT_WAV;
  if (ext == ".flac") return SF_FORMAT_FLAC;
  if (ext == ".ogg" || ext == ".oga") return SF_FORMAT_OGG;
  if (ext == ".mp3") return SF_FORMAT_MPEG;
  MPIASR_FAIL(ExitCode::kBadInput, "audio file '" << path << "': cannot write extension '" << ext
                                                  << "' (use .wav, .flac, .ogg or .mp3)");
}

}  // namespace

SoundFile::SoundFile(const std::string& path) : path_(path) {
  std::error_code error;
  auto status = std::filesystem::status(path, error);
  if (!std::filesystem::exists(status)) {
    MPIASR_FAIL(ExitCode::kBadInput, "audio file '" << path << "': file not found");
  }
  if (!std::filesystem::is_regular_file(status)) {
    MPIASR_FAIL(ExitCode::kBadInput, "audio file '" << path << "': not a regular file");
  }
  file_.reset(sf_open(path.c_str(), SFM_READ, &info_));
  if (!file_) {
    // libsndfile reports "not recognised" as SF_ERR_UNRECOGNISED_FORMAT; its
    // other failures carry internal codes, so the text says what is wrong.
    const char* what = sf_error(nullptr) == SF_ERR_UNRECOGNISED_FORMAT ? "unsupported audio format"
                                                                       : "corrupt header";
    MPIASR_FAIL(ExitCode::kBadInput, "audio file '" << path << "': " << what << " (libsndfile: "
                                                    << sf_strerror(nullptr) << ")");
  }
  // libsndfile gives SF_COUNT_MAX frames when it cannot find the length (a truncated OGG).
  if (info_.samplerate <= 0 || info_.channels <= 0 || info_.frames < 0 ||
      info_.frames == SF_COUNT_MAX) {
    MPIASR_FAIL(
        ExitCode::kBadInput,
        "audio file '" << path << "': corrupt header (sample rate " << info_.samplerate
                       << ", channels " << info_.channels << ", frames "
                       << (info_.frames == SF_COUNT_MAX ? "unknown" : std::to_string(info_.frames))
                       << ")");
  }
}

SoundFile::SoundFile(const std::string& path, SF_INFO info) : path_(path), info_(info) {
  file_.reset(sf_open(path.c_str(), SFM_WRITE, &info_));
  if (!file_) {
    MPIASR_FAIL(ExitCode::kBadInput,
                "audio file '" << path << "': cannot write (" << sf_strerror(nullptr) << ")");
  }
  sf_command(file_.get(), SFC_SET_CLIPPING, nullptr, SF_TRUE);
}

void SoundFile::seek(int64_t frame) {
  if (sf_seek(file_.get(), frame, SEEK_SET) != frame) {
    MPIASR_FAIL(ExitCode::kBadInput, "audio file '" << path_ << "': cannot seek to frame " << frame
                                                    << " (" << sf_strerror(file_.get()) << ")");
  }
}

int64_t SoundFile::read(float* interleaved, int64_t frames) {
  return sf_readf_float(file_.get(), interleaved, frames);
}

void SoundFile::write(const float* interleaved, int64_t frames) {
  if (sf_writef_float(file_.get(), interleaved, frames) != frames) {
    MPIASR_FAIL(ExitCode::kBadInput,
                "audio file '" << path_ << "': write failed (" << sf_strerror(file_.get()) << ")");
  }
}

Resampler::Resampler(double in_rate, double out_rate) : in_rate_(in_rate), out_rate_(out_rate) {
  soxr_error_t error = nullptr;
  soxr_io_spec_t io = soxr_io_spec(SOXR_FLOAT32_I, SOXR_FLOAT32_I);
  soxr_quality_spec_t quality = soxr_quality_spec(SOXR_HQ, 0);
  soxr_runtime_spec_t runtime = soxr_runtime_spec(1);
  soxr_.reset(soxr_create(in_rate, out_rate, 1, &error, &io, &quality, &runtime));
  MPIASR_CHECK(soxr_ && !error,
               "soxr_create(" << in_rate << " -> " << out_rate << "): " << (error ? error : "?"));
}

std::vector<float> Resampler::resample(std::span<const float> in) {
  size_t expected = static_cast<size_t>(std::ceil(in.size() * out_rate_ / in_rate_));
  std::vector<float> out(expected + 64);
  size_t used = 0, produced = 0;
  soxr_error_t error =
      soxr_process(soxr_.get(), in.data(), in.size(), &used, out.data(), out.size(), &produced);
  MPIASR_CHECK(!error && used == in.size(),
               "soxr_process: " << (error ? error : "input left over"));
  size_t total = produced;
  // Flush the filter: input nullptr means end of input; repeat until soxr has nothing left.
  for (;;) {
    if (total == out.size()) out.resize(out.size() * 2);
    error = soxr_process(soxr_.get(), nullptr, 0, nullptr, out.data() + total, out.size() - total,
                         &produced);
    MPIASR_CHECK(!error, "soxr_process (flush): " << error);
    if (produced == 0) break;
    total += produced;
  }
  out.resize(total);
  soxr_clear(soxr_.get());
  return out;
}

AudioInfo read_audio_info(const std::string& path) {
  SoundFile file(path);
  const SF_INFO& info = file.info();
  return AudioInfo{info.samplerate, info.channels, info.frames,
                   static_cast<double>(info.frames) / info.samplerate, format_name(info.format)};
}

std::vector<float> read_audio(const std::string& path, double offset, double duration,
                              int sample_rate) {
  SoundFile file(path);
  const int rate = file.info().samplerate;
  const int channels = file.info().channels;
  const int64_t frames = file.info().frames;
  if (frames <= 0) MPIASR_FAIL(ExitCode::kBadInput, "audio file '" << path << "': has no samples");
  if (!(offset >= 0) || !std::isfinite(duration)) {
    MPIASR_FAIL(ExitCode::kBadInput, "audio file '" << path << "': bad segment (offset " << offset
                                                    << " s, duration " << duration << " s)");
  }
  const double file_seconds = static_cast<double>(frames) / rate;
  const int64_t first = std::llround(offset * rate);
  if (first >= frames) {
    MPIASR_FAIL(ExitCode::kBadInput, "audio file '" << path << "': offset " << offset
                                                    << " s is past the end of the file ("
                                                    << file_seconds << " s)");
  }
  int64_t count = duration < 0 ? frames - first : std::llround((offset + duration) * rate) - first;
  if (first + count > frames) {
    if (offset + duration > file_seconds + kSegmentEndTolerance) {
      MPIASR_FAIL(ExitCode::kBadInput,
                  "audio file '" << path << "': segment " << offset << " s + " << duration
                                 << " s ends past the end of the file (" << file_seconds << " s)");
    }
    count = frames - first;
  }
  if (count <= 0) {
    MPIASR_FAIL(ExitCode::kBadInput, "audio file '" << path << "': empty segment (offset " << offset
                                                    << " s, duration " << duration << " s)");
  }
  if (first > 0) file.seek(first);

  std::vector<float> mono(count);
  std::vector<float> chunk(channels == 1 ? 0 : kChunkFrames * channels);
  int64_t done = 0;
  while (done < count) {
    int64_t want = std::min(kChunkFrames, count - done);
    float* target = channels == 1 ? mono.data() + done : chunk.data();
    int64_t got = file.read(target, want);
    if (got <= 0) {
      MPIASR_FAIL(ExitCode::kBadInput, "audio file '" << path << "': truncated, read " << done
                                                      << " of " << count << " frames");
    }
    if (int64_t i = first_non_finite(target, got * channels); i >= 0) {
      int64_t frame = first + done + i / channels;
      MPIASR_FAIL(ExitCode::kBadInput, "audio file '" << path << "': non-finite sample ("
                                                      << target[i] << ") at frame " << frame << " ("
                                                      << static_cast<double>(frame) / rate
                                                      << " s), channel " << i % channels);
    }
    if (channels > 1) {
      const float scale = 1.0f / channels;
      for (int64_t t = 0; t < got; ++t) {
        float sum = 0;
        for (int c = 0; c < channels; ++c) sum += chunk[t * channels + c];
        mono[done + t] = sum * scale;
      }
    }
    done += got;
  }
  if (sample_rate <= 0 || sample_rate == rate) return mono;
  return Resampler(rate, sample_rate).resample(mono);
}

void write_audio(const std::string& path, std::span<const float> interleaved, int channels,
                 int sample_rate, SampleEncoding encoding) {
  MPIASR_CHECK(channels > 0 && interleaved.size() % channels == 0,
               "write_audio '" << path << "': " << interleaved.size() << " samples for " << channels
                               << " channels");
  SF_INFO info{};
  info.samplerate = sample_rate;
  info.channels = channels;
  const int container = container_for(path);
  if (container == SF_FORMAT_OGG) {
    info.format = SF_FORMAT_OGG | SF_FORMAT_VORBIS;
  } else if (container == SF_FORMAT_MPEG) {
    info.format = SF_FORMAT_MPEG | SF_FORMAT_MPEG_LAYER_III;
  } else if (encoding == SampleEncoding::kFloat32) {
    MPIASR_CHECK(container == SF_FORMAT_WAV,
                 "write_audio '" << path << "': float samples need .wav");
    info.format = SF_FORMAT_WAV | SF_FORMAT_FLOAT;
  } else {
    info.format = container | SF_FORMAT_PCM_16;
  }
  SoundFile file(path, info);
  file.write(interleaved.data(), static_cast<int64_t>(interleaved.size() / channels));
}

}  // namespace mpiasr
