// Audio decoding (libsndfile), downmix to mono, segments and resampling (soxr).
// See audio.h for the math.
#include "io/audio.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <limits>
#include <mutex>
#include <optional>
#include <sstream>

#include "src/base/error.h"
#include "src/base/file.h"

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

// Index of the first value of x[0, n) that is NaN or larger than
// kMaxSampleMagnitude in magnitude, or -1. The common case (all in range) is
// one branch-free pass.
int64_t first_out_of_range(const float* x, int64_t n) {
  bool in_range = true;
  for (int64_t i = 0; i < n; ++i) in_range &= std::abs(x[i]) <= kMaxSampleMagnitude;
  if (in_range) return -1;
  for (int64_t i = 0; i < n; ++i) {
    if (!(std::abs(x[i]) <= kMaxSampleMagnitude)) return i;
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

// libsndfile keeps the error of a failed open in one global, which another
// thread's open overwrites: every open runs under this lock, and a failed
// open's error is read before it is released.
std::mutex& sf_open_mutex() {
  static std::mutex mutex;
  return mutex;
}

// The file `open` (a call of sf_open or sf_open_virtual) opens for reading;
// a failure names `name` and what libsndfile says.
template <typename Open>
SNDFILE* open_for_reading(const std::string& name, Open open) {
  const std::lock_guard lock(sf_open_mutex());
  SNDFILE* file = open();
  if (!file) {
    // libsndfile reports "not recognised" as SF_ERR_UNRECOGNISED_FORMAT; its
    // other failures carry internal codes, so the text says what is wrong.
    const char* what = sf_error(nullptr) == SF_ERR_UNRECOGNISED_FORMAT ? "unsupported audio format"
                                                                       : "corrupt header";
    MPIASR_FAIL(ExitCode::kBadInput, "audio file '" << name << "': " << what << " (libsndfile: "
                                                    << sf_strerror(nullptr) << ")");
  }
  return file;
}

}  // namespace

SoundFile::SoundFile(const std::string& path) : path_(path) {
  require_readable_file(path, "audio file", ExitCode::kBadInput);
  std::error_code error;
  size_bytes_ = std::filesystem::file_size(path, error);
  if (!error && size_bytes_ == 0) {
    MPIASR_FAIL(ExitCode::kBadInput, "audio file '" << path << "': the file is empty (0 bytes)");
  }
  file_.reset(open_for_reading(path, [&] { return sf_open(path.c_str(), SFM_READ, &info_); }));
  check_header();
}

SoundFile SoundFile::from_memory(std::string_view bytes, const std::string& name) {
  SoundFile sound;
  sound.path_ = name;
  sound.size_bytes_ = bytes.size();
  sound.memory_ = std::make_unique<Memory>(Memory{bytes, 0});
  static SF_VIRTUAL_IO io = {
      .get_filelen = [](void* user) -> sf_count_t {
        return sf_count_t(static_cast<Memory*>(user)->bytes.size());
      },
      .seek = [](sf_count_t offset, int whence, void* user) -> sf_count_t {
        Memory& memory = *static_cast<Memory*>(user);
        const int64_t base = whence == SEEK_CUR   ? memory.position
                             : whence == SEEK_END ? int64_t(memory.bytes.size())
                                                  : 0;
        int64_t position = 0;
        if (__builtin_add_overflow(base, offset, &position) || position < 0) return -1;
        return memory.position = position;
      },
      .read = [](void* out, sf_count_t count, void* user) -> sf_count_t {
        Memory& memory = *static_cast<Memory*>(user);
        const int64_t left = std::max<int64_t>(0, int64_t(memory.bytes.size()) - memory.position);
        const int64_t n = std::clamp<int64_t>(count, 0, left);
        if (n > 0) std::memcpy(out, memory.bytes.data() + memory.position, size_t(n));
        memory.position += n;
        return n;
      },
      .write = [](const void*, sf_count_t, void*) -> sf_count_t { return 0; },
      .tell = [](void* user) -> sf_count_t { return static_cast<Memory*>(user)->position; },
  };
  sound.file_.reset(open_for_reading(
      name, [&] { return sf_open_virtual(&io, SFM_READ, &sound.info_, sound.memory_.get()); }));
  sound.check_header();
  return sound;
}

void SoundFile::check_header() {
  // libsndfile gives SF_COUNT_MAX frames when it cannot find the length (a
  // truncated OGG, whose last page is missing).
  if (info_.frames == SF_COUNT_MAX) {
    MPIASR_FAIL(ExitCode::kBadInput, "audio file '" << path_
                                                    << "': truncated: the stream has no end, so "
                                                       "its length is unknown");
  }
  if (info_.samplerate < kMinSampleRate || info_.samplerate > kMaxSampleRate ||
      info_.channels <= 0 || info_.frames < 0) {
    MPIASR_FAIL(ExitCode::kBadInput, "audio file '" << path_ << "': corrupt header (sample rate "
                                                    << info_.samplerate << " Hz, expected "
                                                    << kMinSampleRate << " to " << kMaxSampleRate
                                                    << "; channels " << info_.channels
                                                    << ", frames " << info_.frames << ")");
  }
}

SoundFile SoundFile::reopen() const {
  return memory_ ? from_memory(memory_->bytes, path_) : SoundFile(path_);
}

std::string SoundFile::read_bytes(uint64_t offset, size_t count) const {
  if (offset >= size_bytes_) return "";
  count = size_t(std::min<uint64_t>(count, size_bytes_ - offset));
  if (memory_) return std::string(memory_->bytes.substr(size_t(offset), count));
  std::string bytes(count, '\0');
  std::ifstream in(path_, std::ios::binary);
  in.seekg(std::streamoff(offset));
  in.read(bytes.data(), std::streamsize(count));
  bytes.resize(size_t(std::max<std::streamsize>(in.gcount(), 0)));
  return bytes;
}

SoundFile::SoundFile(const std::string& path, SF_INFO info) : path_(path), info_(info) {
  {
    const std::lock_guard lock(sf_open_mutex());
    file_.reset(sf_open(path.c_str(), SFM_WRITE, &info_));
    if (!file_) {
      MPIASR_FAIL(ExitCode::kBadInput,
                  "audio file '" << path << "': cannot write (" << sf_strerror(nullptr) << ")");
    }
  }
  sf_command(file_.get(), SFC_SET_CLIPPING, nullptr, SF_TRUE);
}

bool SoundFile::try_seek(int64_t frame) {
  return sf_seek(file_.get(), frame, SEEK_SET) == frame;
}

void SoundFile::seek(int64_t frame) {
  if (!try_seek(frame)) {
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

void Resampler::process(std::span<const float> in, bool last, std::vector<float>& out) {
  const size_t room = static_cast<size_t>(std::ceil(in.size() * out_rate_ / in_rate_)) + 64;
  size_t consumed = 0;
  for (;;) {
    // Input nullptr means the end of the input: soxr flushes its filter,
    // a piece per call, until it has nothing left.
    const bool flush = last && consumed == in.size();
    const size_t begin = out.size();
    out.resize(begin + room);
    size_t used = 0, produced = 0;
    soxr_error_t error =
        soxr_process(soxr_.get(), flush ? nullptr : in.data() + consumed, in.size() - consumed,
                     flush ? nullptr : &used, out.data() + begin, room, &produced);
    MPIASR_CHECK(!error, "soxr_process (" << in_rate_ << " -> " << out_rate_ << "): " << error);
    out.resize(begin + produced);
    consumed += used;
    if (flush ? produced == 0 : !last && consumed == in.size()) break;
  }
  if (last) soxr_clear(soxr_.get());
}

std::vector<float> Resampler::resample(std::span<const float> in) {
  std::vector<float> out;
  process(in, true, out);
  return out;
}

namespace {

uint32_t little_endian_u32(const char* bytes) {
  uint32_t value = 0;
  for (int i = 3; i >= 0; --i) value = value << 8 | static_cast<unsigned char>(bytes[i]);
  return value;
}

// Where the sample data of a RIFF/WAVE file starts and how many bytes its
// header declares, or nullopt for other files and for headers that declare
// no length (streamed WAVs write 0 or 0xFFFFFFFF).
struct WaveData {
  uint64_t offset = 0;
  uint64_t declared_bytes = 0;
};
std::optional<WaveData> wave_data_chunk(const SoundFile& file) {
  const std::string head = file.read_bytes(0, 12);
  if (head.size() < 12 || head.compare(0, 4, "RIFF") != 0 || head.compare(8, 4, "WAVE") != 0) {
    return std::nullopt;
  }
  uint64_t offset = 12;
  for (int chunk = 0; chunk < 256; ++chunk) {
    const std::string header = file.read_bytes(offset, 8);
    if (header.size() < 8) return std::nullopt;
    const uint32_t size = little_endian_u32(header.data() + 4);
    if (header.compare(0, 4, "data") == 0) {
      if (size == 0 || size == 0xFFFFFFFF) return std::nullopt;
      return WaveData{offset + 8, size};
    }
    offset += 8 + uint64_t(size) + (size & 1);  // chunks are padded to even sizes
  }
  return std::nullopt;
}

// Whether the bytes of a WAV from `position` to its end are whole chunks
// (a LIST or id3 chunk after the samples is common), or less than one frame.
bool only_chunks_from(const SoundFile& file, uint64_t position, double bytes_per_frame) {
  for (int chunk = 0; chunk < 256; ++chunk) {
    const uint64_t left = file.size_bytes() > position ? file.size_bytes() - position : 0;
    if (double(left) < bytes_per_frame) return true;
    const std::string header = file.read_bytes(position, 8);
    if (header.size() < 8) return false;
    const bool named = std::all_of(header.begin(), header.begin() + 4,
                                   [](char c) { return c >= 0x20 && c <= 0x7e; });
    const uint32_t size = little_endian_u32(header.data() + 4);
    if (!named || 8 + uint64_t(size) > left) return false;
    position += 8 + uint64_t(size) + (size & 1);
  }
  return false;
}

// Whether frame `frame` can be decoded (the seek lands on it and it reads).
bool frame_readable(SoundFile& file, int64_t frame) {
  std::vector<float> one(size_t(file.info().channels));
  if (!file.try_seek(frame)) return false;
  return file.read(one.data(), 1) == 1;
}

std::string seconds_text(double frames, int rate) {
  std::ostringstream text;
  text << std::fixed << std::setprecision(3) << frames / rate << " s";
  return text.str();
}

// "16000 frames (1.000 s)".
std::string frames_text(int64_t frames, int rate) {
  return std::to_string(frames) + " frames (" + seconds_text(double(frames), rate) + ")";
}

[[noreturn]] void fail_truncated(const SoundFile& file, const std::string& declared,
                                 const std::string& held) {
  MPIASR_FAIL(ExitCode::kBadInput, "audio file '" << file.path() << "': truncated: the header says "
                                                  << declared << ", the file holds " << held);
}

}  // namespace

AudioInfo read_audio_info(SoundFile& file) {
  const SF_INFO& info = file.info();
  const int rate = info.samplerate;
  std::string note;
  if (std::optional<WaveData> data = wave_data_chunk(file)) {
    // libsndfile quietly shortens a WAV to the bytes present, and reads no
    // further than the header says; the header and the file size tell.
    const uint64_t declared = data->declared_bytes;
    const uint64_t held = file.size_bytes() > data->offset ? file.size_bytes() - data->offset : 0;
    const double bytes_per_frame =
        info.frames > 0 ? double(std::min(held, declared)) / double(info.frames) : 0;
    auto seconds = [&](uint64_t bytes) {
      return bytes_per_frame > 0 ? " (" + seconds_text(double(bytes) / bytes_per_frame, rate) + ")"
                                 : std::string();
    };
    const std::string says = std::to_string(declared) + " bytes of samples" + seconds(declared);
    if (declared > held) fail_truncated(file, says, std::to_string(held) + seconds(held));
    if (bytes_per_frame > 0 &&
        !only_chunks_from(file, data->offset + declared + (declared & 1), bytes_per_frame)) {
      note = "data past its data chunk: the header says " + says + ", the file holds " +
             std::to_string(held) + seconds(held) + " from the chunk's start, and what follows " +
             "the chunk is no chunk; only the header's part is read";
    }
  } else if (info.frames > 0 && !frame_readable(file, info.frames - 1)) {
    // Compressed files (FLAC, OGG, ...) give their length in the header; a
    // file cut short cannot reach its last frame. The failed seek can leave
    // the decoder stuck, so a fresh handle counts the frames there are.
    SoundFile again = file.reopen();
    std::vector<float> chunk(size_t(kChunkFrames) * size_t(info.channels));
    int64_t held = 0;
    for (int64_t got; (got = again.read(chunk.data(), kChunkFrames)) > 0;) held += got;
    fail_truncated(file, frames_text(info.frames, rate), frames_text(held, rate));
  }
  if (info.frames > 0) file.seek(0);
  return AudioInfo{info.samplerate,
                   info.channels,
                   info.frames,
                   static_cast<double>(info.frames) / info.samplerate,
                   format_name(info.format),
                   std::move(note)};
}

AudioInfo read_audio_info(const std::string& path) {
  SoundFile file(path);
  return read_audio_info(file);
}

std::vector<float> read_audio(const std::string& path, double offset, double duration,
                              int sample_rate) {
  SoundFile file(path);
  return read_audio(file, offset, duration, sample_rate);
}

AudioStream::AudioStream(SoundFile& file, double offset, double duration, int sample_rate)
    : file_(file), rate_(file.info().samplerate) {
  const std::string& path = file.path();
  const int64_t frames = file.info().frames;
  if (frames <= 0) MPIASR_FAIL(ExitCode::kBadInput, "audio file '" << path << "': has no samples");
  if (!(offset >= 0) || !std::isfinite(duration)) {
    MPIASR_FAIL(ExitCode::kBadInput, "audio file '" << path << "': bad segment (offset " << offset
                                                    << " s, duration " << duration << " s)");
  }
  const double file_seconds = static_cast<double>(frames) / rate_;
  first_ = std::llround(offset * rate_);
  if (first_ >= frames) {
    MPIASR_FAIL(ExitCode::kBadInput, "audio file '" << path << "': offset " << offset
                                                    << " s is past the end of the file ("
                                                    << file_seconds << " s)");
  }
  count_ = duration < 0 ? frames - first_ : std::llround((offset + duration) * rate_) - first_;
  if (first_ + count_ > frames) {
    if (offset + duration > file_seconds + kSegmentEndTolerance) {
      MPIASR_FAIL(ExitCode::kBadInput,
                  "audio file '" << path << "': segment " << offset << " s + " << duration
                                 << " s ends past the end of the file (" << file_seconds << " s)");
    }
    count_ = frames - first_;
  }
  if (count_ <= 0) {
    MPIASR_FAIL(ExitCode::kBadInput, "audio file '" << path << "': empty segment (offset " << offset
                                                    << " s, duration " << duration << " s)");
  }
  if (first_ > 0) file.seek(first_);
  if (sample_rate > 0 && sample_rate != rate_) {
    resampler_.emplace(rate_, sample_rate);
    samples_ = std::llround(static_cast<double>(count_) * sample_rate / rate_);
  } else {
    samples_ = count_;
  }
  chunk_.resize(size_t(kChunkFrames) * size_t(file.info().channels));
}

bool AudioStream::next(std::vector<float>& out) {
  out.clear();
  if (done_ == count_) return false;
  const int channels = file_.info().channels;
  const int64_t want = std::min(kChunkFrames, count_ - done_);
  const int64_t got = file_.read(chunk_.data(), want);
  if (got <= 0) {
    fail_truncated(file_, frames_text(file_.info().frames, rate_),
                   frames_text(first_ + done_, rate_));
  }
  if (int64_t i = first_out_of_range(chunk_.data(), got * channels); i >= 0) {
    const int64_t frame = first_ + done_ + i / channels;
    MPIASR_FAIL(
        ExitCode::kBadInput,
        "audio file '" << file_.path() << "': "
                       << (std::isfinite(chunk_[i]) ? "sample out of range" : "non-finite sample")
                       << " (" << chunk_[i] << ") at frame " << frame << " ("
                       << static_cast<double>(frame) / rate_ << " s), channel " << i % channels);
  }
  if (channels == 1) {
    mono_.assign(chunk_.begin(), chunk_.begin() + got);
  } else {
    mono_.resize(size_t(got));
    const float scale = 1.0f / channels;
    for (int64_t t = 0; t < got; ++t) {
      float sum = 0;
      for (int c = 0; c < channels; ++c) sum += chunk_[t * channels + c];
      mono_[t] = sum * scale;
    }
  }
  done_ += got;
  if (resampler_) {
    resampler_->process(mono_, done_ == count_, out);
  } else {
    out.swap(mono_);
  }
  return true;
}

std::vector<float> read_audio(SoundFile& file, double offset, double duration, int sample_rate) {
  AudioStream stream(file, offset, duration, sample_rate);
  std::vector<float> samples, piece;
  samples.reserve(size_t(stream.samples()));
  while (stream.next(piece)) samples.insert(samples.end(), piece.begin(), piece.end());
  return samples;
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
