// Audio decoding and resampling: any file libsndfile reads (WAV, FLAC,
// OGG/Vorbis, ...) becomes mono float samples at the model's rate.
//
//   decode     libsndfile, samples normalized to [-1, 1) (PCM) or kept as stored (float files)
//   downmix    mono[t] = (1/C) * sum_c frame[t][c]          (interleaved frames, C channels)
//   segment    frames [round(offset * sr), round((offset + duration) * sr)) of the file
//   resample   soxr, high quality (SOXR_HQ: 20-bit precision, linear phase), one thread;
//              n input samples become about n * out_rate / in_rate output samples
//
// Every sample is checked to be finite and at most kMaxSampleMagnitude in
// magnitude. Errors are Error(kBadInput) naming the file and what is wrong
// with it.
#pragma once

#include <sndfile.h>
#include <soxr.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace mpiasr {

struct AudioInfo {
  int sample_rate = 0;
  int channels = 0;
  int64_t frames = 0;
  double duration = 0;  // frames / sample_rate, seconds
  std::string format;   // container extension and encoding, e.g. "flac Signed 16 bit PCM"
  // What is odd about a file that is read anyway, else "": a WAV whose data
  // chunk declares fewer bytes than follow it (and what follows is no chunk)
  // is read as far as its header says, as every reader of WAV does.
  std::string note;
};

// A segment (offset + duration) may end this far past the end of its file,
// since manifests round durations; read_audio then stops at the end of the file.
constexpr double kSegmentEndTolerance = 0.05;  // seconds

// Sample rates a file may have; others are reported as a corrupt header (a
// rate of 1 Hz would make resampling to 16 kHz allocate 16000 x the file).
constexpr int kMinSampleRate = 1000;
constexpr int kMaxSampleRate = 1'000'000;

// The largest sample magnitude a file may hold. PCM decodes to [-1, 1);
// float files may hold anything, and values near the float range overflow
// to infinity in resampling and in the power spectrum. 1e10 leaves room for
// floats written at an integer scale (32768 for 16 bits, 8388608 for 24).
constexpr float kMaxSampleMagnitude = 1e10f;

class SoundFile;

// The header of an audio file, with its length checked against the data:
// a file cut short, or a header that claims more data than the file holds,
// is reported as truncated with both lengths. A WAV whose data chunk claims
// less than follows it gets a note (AudioInfo::note) with both lengths.
// Throws Error(kBadInput) when the file is missing, unreadable, empty (0
// bytes), truncated, its format is unsupported or its header is corrupt.
AudioInfo read_audio_info(const std::string& path);
AudioInfo read_audio_info(SoundFile& file);

// Mono samples of [offset, offset + duration) seconds of the file (duration < 0:
// to the end), resampled to sample_rate (sample_rate <= 0: keep the file's rate).
std::vector<float> read_audio(const std::string& path, double offset = 0, double duration = -1,
                              int sample_rate = 16000);
std::vector<float> read_audio(SoundFile& file, double offset = 0, double duration = -1,
                              int sample_rate = 16000);

// How write_audio stores samples: 16-bit integers or 32-bit floats (WAV only).
// OGG files are always Vorbis, MP3 files MPEG layer III.
enum class SampleEncoding { kPcm16, kFloat32 };

// Writes interleaved frames ([frames, channels]) to a file whose container is
// chosen by the extension: .wav, .flac, .ogg, .mp3 (when libsndfile has MPEG
// support). PCM samples are clipped to [-1, 1].
void write_audio(const std::string& path, std::span<const float> interleaved, int channels,
                 int sample_rate, SampleEncoding encoding = SampleEncoding::kPcm16);

// An open libsndfile handle, closed on destruction.
class SoundFile {
 public:
  // Opens for reading; throws Error(kBadInput) naming the file.
  explicit SoundFile(const std::string& path);
  // Opens for writing with the given SF_INFO (format, sample rate, channels).
  SoundFile(const std::string& path, SF_INFO info);
  // Opens the file whose bytes are `bytes` (which must outlive it) for
  // reading, through libsndfile's virtual I/O; `name` names it in errors.
  static SoundFile from_memory(std::string_view bytes, const std::string& name);

  const SF_INFO& info() const { return info_; }
  const std::string& path() const { return path_; }
  // Moves the read position to frame `frame`; throws Error(kBadInput) when
  // the file cannot get there.
  void seek(int64_t frame);
  // The same without throwing: whether the position is now `frame`.
  bool try_seek(int64_t frame);
  // Reads up to `frames` interleaved frames; returns how many were read.
  int64_t read(float* interleaved, int64_t frames);
  void write(const float* interleaved, int64_t frames);
  // A second handle on the same file, at its first frame.
  SoundFile reopen() const;
  // Bytes [offset, offset + count) of the file as stored (fewer at its end).
  std::string read_bytes(uint64_t offset, size_t count) const;
  uint64_t size_bytes() const { return size_bytes_; }

 private:
  struct Closer {
    void operator()(SNDFILE* file) const { sf_close(file); }
  };
  // The read position in a file opened from memory (the virtual I/O's state).
  struct Memory {
    std::string_view bytes;
    int64_t position = 0;
  };
  SoundFile() = default;
  // Checks the header just opened; throws Error(kBadInput) naming the file.
  void check_header();

  std::string path_;
  SF_INFO info_{};
  uint64_t size_bytes_ = 0;
  std::unique_ptr<Memory> memory_;  // from_memory only
  std::unique_ptr<SNDFILE, Closer> file_;
};

// A one-channel soxr resampler from in_rate to out_rate, deleted on destruction.
class Resampler {
 public:
  Resampler(double in_rate, double out_rate);
  // Resamples a whole signal (the filter is flushed at the end, so the tail is
  // complete). The resampler is reset afterwards and may be used again.
  std::vector<float> resample(std::span<const float> in);
  // Resamples the next piece of a signal, appending its output to `out`;
  // `last` marks the signal's last piece, after which the filter is flushed
  // and reset. The pieces' outputs, joined, are resample() of the signal.
  void process(std::span<const float> in, bool last, std::vector<float>& out);

 private:
  struct Deleter {
    void operator()(soxr_t soxr) const { soxr_delete(soxr); }
  };
  double in_rate_;
  double out_rate_;
  std::unique_ptr<soxr, Deleter> soxr_;
};

// The samples read_audio returns, a piece at a time: each call of next()
// reads at most 16384 frames of the segment and resamples them. soxr keeps
// its filter's state from piece to piece and gives the samples it gives for
// the whole signal in one call, so what the pieces hold, joined, is
// read_audio's result; a caller holds a piece, never the whole file.
class AudioStream {
 public:
  // file must outlive the stream. Throws Error(kBadInput) as read_audio does
  // for a bad segment; next() for a file cut short or a sample out of range.
  AudioStream(SoundFile& file, double offset, double duration, int sample_rate);
  // The samples of the whole segment: its frames, or lround(frames x
  // sample_rate / file rate) when resampled (as soxr gives them).
  int64_t samples() const { return samples_; }
  // Replaces `out` with the next samples; false, with out empty, at the end.
  bool next(std::vector<float>& out);

 private:
  SoundFile& file_;
  int rate_ = 0;
  int64_t first_ = 0, count_ = 0, done_ = 0;  // frames of the file
  int64_t samples_ = 0;
  std::optional<Resampler> resampler_;
  std::vector<float> chunk_, mono_;
};

}  // namespace mpiasr
