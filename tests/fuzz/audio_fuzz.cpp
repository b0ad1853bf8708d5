// libFuzzer target: the audio reader on a file held in memory (libsndfile's
// virtual I/O): the header and its length check, then every sample decoded,
// downmixed and resampled to 16 kHz. A file either fails with a bad-input
// Error or gives finite samples, about as many as its length says.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "io/audio.h"
#include "src/base/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace mpiasr;
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    SoundFile file = SoundFile::from_memory(bytes, "fuzz.audio");
    const AudioInfo info = read_audio_info(file);
    const std::vector<float> samples = read_audio(file, 0, -1, 16000);
    for (float x : samples) {
      if (!std::isfinite(x)) std::abort();
    }
    // soxr gives n * 16000 / rate samples, give or take its filter's rounding.
    const double expected = double(info.frames) * 16000.0 / info.sample_rate;
    if (std::abs(double(samples.size()) - expected) > 2 + 0.01 * expected) std::abort();
  } catch (const Error& error) {
    if (error.code() != ExitCode::kBadInput) std::abort();
  }
  return 0;
}
