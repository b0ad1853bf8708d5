// What the importers share: checking the entries and the report; see
// corpus_import.h.
#include "io/corpus_import.h"

#include <sndfile.h>

#include <algorithm>
#include <iomanip>
#include <sstream>
#include <tuple>

#include "io/text_normalize.h"
#include "io/utterance_check.h"
#include "src/base/error.h"

namespace mpiasr {

std::string ImportReport::summary() const {
  std::ostringstream out;
  out << "kept " << utterances.size() << " of " << entries << " entries (" << std::fixed
      << std::setprecision(2) << seconds / 3600 << " h of audio), dropped " << dropped.size();
  if (!dropped.empty()) out << ":";
  for (const InputProblem& problem : dropped) out << "\n  " << to_string(problem);
  for (const InputProblem& warning : warnings) out << "\n  warning: " << to_string(warning);
  return out.str();
}

bool libsndfile_reads_mpeg() {
  int count = 0;
  sf_command(nullptr, SFC_GET_FORMAT_MAJOR_COUNT, &count, sizeof(count));
  for (int i = 0; i < count; ++i) {
    SF_FORMAT_INFO info{};
    info.format = i;
    sf_command(nullptr, SFC_GET_FORMAT_MAJOR, &info, sizeof(info));
    if ((info.format & SF_FORMAT_TYPEMASK) == SF_FORMAT_MPEG) return true;
  }
  return false;
}

namespace detail {

ImportReport finish_import(const std::string& source, std::vector<ImportEntry> entries,
                           std::vector<InputProblem> dropped) {
  // Entry i is line i + 1 of the manifest handed to validate_manifest, so its
  // problems map back to the entry's origin.
  Manifest manifest;
  manifest.path = source;
  manifest.use_duration_cache = false;
  std::vector<InputProblem> origins;
  for (ImportEntry& entry : entries) {
    std::string normalized;
    try {
      normalized = normalize_text(entry.utterance.transcript, TextNormalizeOptions{});
    } catch (const Error&) {
      normalized = "not UTF-8";  // validate_manifest names the byte
    }
    if (normalized.empty()) {
      InputProblem problem = entry.origin;
      problem.what = "empty transcript after normalization: '" + entry.utterance.transcript + "'";
      dropped.push_back(std::move(problem));
      continue;
    }
    entry.utterance.line = int(origins.size()) + 1;
    origins.push_back(entry.origin);
    manifest.utterances.push_back(std::move(entry.utterance));
  }
  ValidationOptions validation;
  validation.skip_bad = true;
  validation.check_samples = false;
  validation.allow_empty = true;
  const ValidationReport checked = validate_manifest(manifest, validation);
  for (const InputProblem& problem : checked.problems) {
    InputProblem where = origins[size_t(problem.line - 1)];
    where.what = problem.what;
    dropped.push_back(std::move(where));
  }

  ImportReport report;
  for (const InputProblem& warning : checked.warnings) {
    InputProblem where = origins[size_t(warning.line - 1)];
    where.what = warning.what;
    report.warnings.push_back(std::move(where));
  }
  report.entries = dropped.size() - checked.problems.size() + checked.dropped + checked.kept;
  for (Utterance& utterance : manifest.utterances) {
    const InputProblem& origin = origins[size_t(utterance.line - 1)];
    utterance.line = origin.line;
    report.seconds += utterance.duration;
    report.utterances.push_back(std::move(utterance));
  }
  // In file and line order, whichever check found them.
  std::stable_sort(dropped.begin(), dropped.end(),
                   [](const InputProblem& a, const InputProblem& b) {
                     return std::tie(a.file, a.line) < std::tie(b.file, b.line);
                   });
  report.dropped = std::move(dropped);
  if (report.utterances.empty()) {
    MPIASR_FAIL(ExitCode::kBadInput, source << ": nothing to import; " << report.summary());
  }
  return report;
}

}  // namespace detail

}  // namespace mpiasr
