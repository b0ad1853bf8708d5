// Bad-input validation of a manifest; see utterance_check.h for what is checked.
// Utterances are checked in parallel: workers take the next index from an
// atomic counter and write only their utterance's slot of `found`.
#include "io/utterance_check.h"

#include <algorithm>
#include <atomic>
#include <future>
#include <sstream>
#include <thread>

#include "io/text_normalize.h"
#include "src/base/error.h"

namespace mpiasr {
namespace {

void check_transcript(const Utterance& u, const ValidationOptions& options,
                      std::vector<std::string>& found) {
  if (u.transcript.empty()) {
    if (options.require_transcript) found.push_back("empty transcript");
    return;
  }
  try {
    utf8_decode(u.transcript);
  } catch (const Error& e) {
    found.push_back(std::string("transcript is not UTF-8: ") + e.what());
  }
}

void check_audio(Utterance& u, AudioInfoCache& cache, const ValidationOptions& options,
                 std::vector<std::string>& found, std::vector<std::string>& warned) {
  AudioInfo info;
  try {
    info = cache.lookup(u.audio_path);
  } catch (const Error& e) {
    found.push_back(e.what());
    return;
  }
  std::ostringstream what;
  what << "audio file '" << u.audio_path << "': ";
  if (!info.note.empty()) warned.push_back(what.str() + info.note);
  if (info.frames <= 0) {
    found.push_back(what.str() + "has no samples");
    return;
  }
  if (u.offset >= info.duration) {
    what << "offset " << u.offset << " s is past the end of the file (" << info.duration << " s)";
    found.push_back(what.str());
    return;
  }
  if (u.duration < 0) u.duration = info.duration - u.offset;
  if (u.offset + u.duration > info.duration + kSegmentEndTolerance) {
    what << "segment " << u.offset << " s + " << u.duration << " s ends past the end of the file ("
         << info.duration << " s); clipped to " << info.duration - u.offset << " s";
    warned.push_back(what.str());
    u.duration = info.duration - u.offset;
  }
  if (u.duration * info.sample_rate < 1) {
    what << "zero-length segment (duration " << u.duration << " s)";
    found.push_back(what.str());
    return;
  }
  if (options.check_samples) {
    try {
      read_audio(u.audio_path, u.offset, u.duration, /*sample_rate=*/0);
    } catch (const Error& e) {
      found.push_back(e.what());
    }
  }
}

}  // namespace

std::string ValidationReport::summary() const {
  std::ostringstream out;
  out << "kept " << kept << " of " << kept + dropped << " utterances, dropped " << dropped;
  if (!problems.empty()) out << ":";
  for (const InputProblem& problem : problems) out << "\n  " << to_string(problem);
  return out.str();
}

ValidationReport validate_manifest(Manifest& manifest, const ValidationOptions& options) {
  std::vector<Utterance>& utterances = manifest.utterances;
  std::vector<std::vector<std::string>> found(utterances.size()), warned(utterances.size());
  AudioInfoCache cache(manifest.path, manifest.use_duration_cache);

  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < utterances.size(); i = next++) {
      check_transcript(utterances[i], options, found[i]);
      check_audio(utterances[i], cache, options, found[i], warned[i]);
    }
  };
  size_t threads =
      options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  threads = std::min(threads, std::max<size_t>(1, utterances.size()));
  std::vector<std::future<void>> running;
  for (size_t t = 1; t < threads; ++t) running.push_back(std::async(std::launch::async, worker));
  worker();
  for (auto& done : running) done.get();
  const std::optional<std::string> unsaved = cache.save();

  // Problems in manifest order: unparsable lines and utterance problems, by line.
  ValidationReport report;
  report.problems = manifest.problems;
  std::vector<Utterance> kept;
  for (size_t i = 0; i < utterances.size(); ++i) {
    for (std::string& what : found[i])
      report.problems.push_back({manifest.path, utterances[i].line, what});
    for (std::string& what : warned[i])
      report.warnings.push_back({manifest.path, utterances[i].line, what});
    if (found[i].empty()) kept.push_back(std::move(utterances[i]));
  }
  if (unsaved) report.warnings.push_back({manifest.path, 0, *unsaved});
  std::stable_sort(report.problems.begin(), report.problems.end(),
                   [](const InputProblem& a, const InputProblem& b) { return a.line < b.line; });
  report.kept = kept.size();
  report.dropped = manifest.problems.size() + utterances.size() - kept.size();

  if (!report.problems.empty() && !options.skip_bad) {
    std::ostringstream list;
    for (const InputProblem& problem : report.problems) list << "\n  " << to_string(problem);
    MPIASR_FAIL(
        ExitCode::kBadInput,
        "manifest '" << manifest.path << "': " << report.problems.size() << " problem(s) in "
                     << report.dropped << " of " << report.kept + report.dropped
                     << " entries; fix them, or drop them with data.skip_bad=true:" << list.str());
  }
  if (report.kept == 0 && !options.allow_empty) {
    MPIASR_FAIL(ExitCode::kBadInput, "manifest '" << manifest.path << "': no usable utterance\n"
                                                  << report.summary());
  }
  utterances = std::move(kept);
  manifest.problems.clear();
  return report;
}

}  // namespace mpiasr
