// Atomic checkpoint folders; the layout and the write protocol are described
// in io/checkpoint.h. Everything durable goes through write_file_synced and
// fsync_dir so that the order "files, folder, rename, root, pointer" holds on
// disk, not only in the page cache.
#include "io/checkpoint.h"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <filesystem>

#include "io/checksum.h"
#include "src/base/error.h"
#include "src/base/file.h"

namespace mpiasr {

namespace fs = std::filesystem;

namespace {

constexpr const char* kStateFile = "state.json";
constexpr const char* kTmpPrefix = ".tmp-step-";

std::string step_name(int64_t step) {
  char name[32];
  std::snprintf(name, sizeof name, "step-%08lld", static_cast<long long>(step));
  return name;
}

}  // namespace

std::optional<int64_t> parse_step_name(std::string_view name) {
  if (!name.starts_with("step-")) return std::nullopt;
  std::string_view digits = name.substr(5);
  if (digits.size() < 8 || digits.size() > 18) return std::nullopt;
  int64_t step = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return std::nullopt;
    step = step * 10 + (c - '0');
  }
  return step;
}

std::vector<int64_t> step_folders(const std::string& root) {
  std::vector<int64_t> steps;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(root, error)) {
    auto step = parse_step_name(entry.path().filename().string());
    if (step && entry.is_directory()) steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

namespace {

bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." && name.find('/') == std::string::npos &&
         name.find('\0') == std::string::npos;
}

// Why a file does not match its state.json entry {"size", "crc32"}, or nullopt.
// `contents` is the file when already read; otherwise it is read from disk,
// after a size check that catches truncation without reading.
std::optional<std::string> file_problem(const std::string& dir, const std::string& name,
                                        const nlohmann::json& entry, const std::string* contents) {
  if (!is_plain_file_name(name)) return "state.json lists an invalid file name '" + name + "'";
  if (!entry.is_object() || !entry.contains("size") || !entry["size"].is_number_unsigned() ||
      !entry.contains("crc32") || !entry["crc32"].is_string()) {
    return "state.json entry of " + name + " lacks size/crc32: " + entry.dump();
  }
  uint64_t size = entry["size"].get<uint64_t>();
  std::string crc = entry["crc32"].get<std::string>();
  std::string path = dir + "/" + name;
  std::error_code error;
  uint64_t actual_size = contents ? contents->size() : fs::file_size(path, error);
  if (error) return name + " is missing";
  if (actual_size != size) {
    return name + " is " + std::to_string(actual_size) + " bytes, state.json says " +
           std::to_string(size) + " (truncated?)";
  }
  std::string actual_crc = crc32_hex(contents ? crc32_of(*contents) : crc32_of_file(path));
  if (actual_crc != crc) {
    return name + " has CRC32 " + actual_crc + ", state.json says " + crc + " (corrupt)";
  }
  return std::nullopt;
}

// state.json of a checkpoint folder, parsed, or the reason it is unusable.
std::optional<std::string> read_state(const std::string& dir, nlohmann::json& state) {
  std::string path = dir + "/" + kStateFile;
  if (!fs::exists(path)) return std::string(kStateFile) + " is missing";
  try {
    state = nlohmann::json::parse(read_file(path));
  } catch (const nlohmann::json::exception& e) {
    return std::string(kStateFile) + " is not valid JSON (" + e.what() + ")";
  }
  if (!state.is_object()) return std::string(kStateFile) + " is not a JSON object";
  if (!state.contains("files") || !state["files"].is_object()) {
    return std::string(kStateFile) + " has no \"files\" checksums";
  }
  return std::nullopt;
}

void remove_path(const fs::path& path) {
  std::error_code error;
  fs::remove_all(path, error);
  if (error) {
    MPIASR_FAIL(ExitCode::kCheckpoint,
                "cannot remove " << path.string() << ": " << file_error_text(error.value()));
  }
}

}  // namespace

std::string checkpoint_dir(const std::string& root, int64_t step) {
  MPIASR_CHECK(step >= 0, "checkpoint step " << step << " is negative");
  return root + "/" + step_name(step);
}

std::optional<int64_t> read_checkpoint_pointer(const std::string& root, const std::string& name) {
  std::string path = root + "/" + name;
  if (!fs::exists(path)) return std::nullopt;
  std::string text = read_file(path);
  while (!text.empty() && std::isspace(static_cast<unsigned char>(text.back()))) text.pop_back();
  auto step = parse_step_name(text);
  if (!step) {
    MPIASR_FAIL(ExitCode::kCheckpoint,
                path << ": expected a folder name like step-00001000, found '" << text << "'");
  }
  return step;
}

std::string write_checkpoint(const std::string& root, int64_t step, const CheckpointFiles& contents,
                             int keep_last, std::optional<int64_t> best_step) {
  MPIASR_CHECK(step >= 0, "checkpoint step " << step << " is negative");
  MPIASR_CHECK(keep_last >= 1, "keep_last must be at least 1, got " << keep_last);
  MPIASR_CHECK(contents.state.is_object() && !contents.state.contains("files"),
               "checkpoint state must be a JSON object without a \"files\" key");
  for (const auto& [name, bytes] : contents.files) {
    MPIASR_CHECK(is_plain_file_name(name) && name != kStateFile,
                 "invalid checkpoint file name '" << name << "'");
  }
  if (best_step && *best_step != step) {
    MPIASR_CHECK(*best_step < step && fs::is_directory(checkpoint_dir(root, *best_step)),
                 "best step " << *best_step << " is not a checkpoint under " << root);
  }

  std::error_code error;
  if (fs::create_directories(root, error)) {
    // A new ROOT must itself survive a crash: sync the folder that holds it.
    fs::path folder = fs::absolute(root).lexically_normal();
    if (!folder.has_filename()) folder = folder.parent_path();  // "ROOT/"
    fsync_dir(folder.parent_path().string());
  }
  if (error)
    MPIASR_FAIL(ExitCode::kCheckpoint,
                "cannot create " << root << ": " << file_error_text(error.value()));
  // Folders of interrupted writes (and of a replaced step, below) are garbage.
  for (const auto& entry : fs::directory_iterator(root)) {
    if (entry.path().filename().string().starts_with(kTmpPrefix)) remove_path(entry.path());
  }

  std::string name = step_name(step);
  std::string tmp = root + "/" + kTmpPrefix + name.substr(5) + "-" + std::to_string(::getpid());
  if (!fs::create_directory(tmp, error)) {
    MPIASR_FAIL(ExitCode::kCheckpoint,
                "cannot create " << tmp << ": " << file_error_text(error.value()));
  }
  nlohmann::json state = contents.state;
  state["files"] = nlohmann::json::object();
  try {
    for (const auto& [file, bytes] : contents.files) {
      write_file_synced(tmp + "/" + file, bytes);
      state["files"][file] = {{"size", bytes.size()}, {"crc32", crc32_hex(crc32_of(bytes))}};
    }
    write_file_synced(tmp + "/" + kStateFile, state.dump(2) + "\n");
    fsync_dir(tmp);
  } catch (const Error&) {
    // A partial write (a full disk) is garbage, and holds space that a full
    // disk needs back: removed here, not by the next write.
    std::error_code ignored;
    fs::remove_all(tmp, ignored);
    throw;
  }

  std::string final_dir = root + "/" + name;
  std::string replaced;
  if (fs::exists(final_dir)) {
    replaced = tmp + "-replaced";
    rename_path(final_dir, replaced);
  }
  rename_path(tmp, final_dir);
  fsync_dir(root);
  if (!replaced.empty()) remove_path(replaced);
  write_file_atomic(root + "/latest", name + "\n");
  if (best_step) write_file_atomic(root + "/best", step_name(*best_step) + "\n");

  // Retention: the keep_last newest steps up to `step`, and the best one.
  std::optional<int64_t> best = read_checkpoint_pointer(root, "best");
  if (best && *best > step) {
    remove_path(root + "/best");
    best.reset();
  }
  int64_t best_kept = best.value_or(-1);
  std::vector<int64_t> steps = step_folders(root);
  int kept = 0;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    bool newest_k = *it <= step && kept < keep_last;
    if (newest_k) ++kept;
    if (!newest_k && *it != best_kept) remove_path(checkpoint_dir(root, *it));
  }
  fsync_dir(root);
  return final_dir;
}

std::optional<std::string> read_checkpoint_state(const std::string& dir, nlohmann::json& state) {
  return read_state(dir, state);
}

std::optional<std::string> checkpoint_problem(const std::string& dir) {
  if (!fs::is_directory(dir)) return dir + " is not a folder";
  nlohmann::json state;
  if (auto problem = read_state(dir, state)) return problem;
  for (const auto& [name, entry] : state["files"].items()) {
    if (auto problem = file_problem(dir, name, entry, nullptr)) return problem;
  }
  return std::nullopt;
}

std::vector<int64_t> list_intact_steps(const std::string& root, const CheckpointLog& log) {
  std::vector<int64_t> intact;
  for (int64_t step : step_folders(root)) {
    std::string dir = checkpoint_dir(root, step);
    if (auto problem = checkpoint_problem(dir)) {
      log("checkpoint " + dir + " is not intact: " + *problem);
    } else {
      intact.push_back(step);
    }
  }
  return intact;
}

std::optional<int64_t> find_latest_intact(const std::string& root, const CheckpointLog& log) {
  std::vector<int64_t> steps = step_folders(root);
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    std::string dir = checkpoint_dir(root, *it);
    auto problem = checkpoint_problem(dir);
    if (!problem) return *it;
    log("checkpoint " + dir + " is not intact: " + *problem + "; trying an older one");
  }
  return std::nullopt;
}

CheckpointFiles read_checkpoint(const std::string& root, int64_t step) {
  std::string dir = checkpoint_dir(root, step);
  if (!fs::is_directory(dir)) MPIASR_FAIL(ExitCode::kCheckpoint, "no checkpoint " << dir);
  CheckpointFiles checkpoint;
  if (auto problem = read_state(dir, checkpoint.state)) {
    MPIASR_FAIL(ExitCode::kCheckpoint, "checkpoint " << dir << " is not intact: " << *problem);
  }
  for (const auto& [name, entry] : checkpoint.state["files"].items()) {
    std::string path = dir + "/" + name;
    bool present = is_plain_file_name(name) && fs::is_regular_file(path);
    std::string contents = present ? read_file(path) : std::string();
    if (auto problem = file_problem(dir, name, entry, present ? &contents : nullptr)) {
      MPIASR_FAIL(ExitCode::kCheckpoint, "checkpoint " << dir << " is not intact: " << *problem);
    }
    checkpoint.files[name] = std::move(contents);
  }
  checkpoint.state.erase("files");
  return checkpoint;
}

}  // namespace mpiasr
