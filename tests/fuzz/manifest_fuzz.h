// The body of the three manifest fuzz targets: parse the input as a manifest
// of one format (nothing is read from disk) and check what every parsed
// utterance promises: a line of the input, a resolved non-empty path, a
// transcript without surrounding white space, and non-negative times.
#pragma once

#include <cctype>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "io/manifest.h"
#include "src/base/error.h"

namespace mpiasr::fuzz {

inline void check(bool ok) {
  if (!ok) std::abort();
}

inline int fuzz_manifest(const uint8_t* data, size_t size, const char* path) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  ManifestOptions options;
  options.substitutions["data_root"] = "/data";
  options.use_duration_cache = false;
  Manifest manifest;
  try {
    manifest = parse_manifest(text, path, options);
  } catch (const Error& error) {
    check(error.code() == ExitCode::kBadInput);  // a CSV header without wav and wrd
    return 0;
  }
  size_t lines = 1;
  for (char c : text) lines += c == '\n';
  for (const Utterance& u : manifest.utterances) {
    check(u.line >= 1 && size_t(u.line) <= lines);
    check(!u.audio_path.empty());
    check(u.transcript.empty() ||
          (!std::isspace(static_cast<unsigned char>(u.transcript.front())) &&
           !std::isspace(static_cast<unsigned char>(u.transcript.back()))));
    check(u.offset >= 0 && std::isfinite(u.offset));
    check(u.duration == -1 || (u.duration >= 0 && std::isfinite(u.duration)));
  }
  for (const InputProblem& problem : manifest.problems) {
    check(problem.line >= 1 && size_t(problem.line) <= lines && !problem.what.empty());
  }
  return 0;
}

}  // namespace mpiasr::fuzz
