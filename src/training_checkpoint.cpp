// Training checkpoint contents; see training_checkpoint.h.
#include "src/training_checkpoint.h"

#include <cerrno>
#include <cmath>
#include <filesystem>
#include <vector>

#include "io/safetensors.h"
#include "src/base/error.h"
#include "src/base/file.h"
#include "src/model_config.h"

namespace mpiasr {

namespace fs = std::filesystem;

namespace {

template <typename T>
T field(const nlohmann::json& state, const char* name, const std::string& source) {
  if (!state.contains(name)) {
    MPIASR_FAIL(ExitCode::kCheckpoint, source << " lacks \"" << name << "\"");
  }
  try {
    return state.at(name).get<T>();
  } catch (const nlohmann::json::exception&) {
    MPIASR_FAIL(ExitCode::kCheckpoint,
                source << " has a bad \"" << name << "\": " << state.at(name).dump());
  }
}

}  // namespace

std::string tokenizer_file_name(const TokenizerConfig& tokenizer) {
  return tokenizer.type == TokenizerType::kChar ? "tokens.txt" : "tokenizer.model";
}

nlohmann::json TrainingState::to_json() const {
  return {
      {"step", step},
      {"optimizer_step", optimizer_step},
      {"epoch", epoch},
      {"batch_in_epoch", batch_in_epoch},
      {"batches_in_epoch", batches_in_epoch},
      {"seed", seed},
      {"scaler", scaler},
      {"schedule", {{"total_steps", total_steps}, {"lr", lr}}},
      {"train_seconds", train_seconds},
      {"best_cer", std::isfinite(best_cer) ? nlohmann::json(best_cer) : nlohmann::json()},
      {"best_step", best_step},
      {"world_size", world_size},
      {"accumulation", accumulation},
      {"threads", threads},
      {"config_hash", config_hash},
      {"train_manifest_hash", train_manifest_hash},
      {"valid_manifest_hash", valid_manifest_hash},
      {"tokenizer_file", tokenizer_file},
      {"cmvn_file", cmvn_file},
  };
}

TrainingState TrainingState::from_json(const nlohmann::json& state, const std::string& source) {
  TrainingState s;
  s.step = field<int64_t>(state, "step", source);
  s.optimizer_step = field<int64_t>(state, "optimizer_step", source);
  s.epoch = field<int>(state, "epoch", source);
  s.batch_in_epoch = field<int64_t>(state, "batch_in_epoch", source);
  s.batches_in_epoch = field<int64_t>(state, "batches_in_epoch", source);
  s.seed = field<uint64_t>(state, "seed", source);
  s.scaler = field<nlohmann::json>(state, "scaler", source);
  const nlohmann::json schedule = field<nlohmann::json>(state, "schedule", source);
  s.total_steps = field<int64_t>(schedule, "total_steps", source);
  s.lr = field<double>(schedule, "lr", source);
  // Absent from checkpoints written before it was recorded: no time spent.
  if (state.contains("train_seconds"))
    s.train_seconds = field<double>(state, "train_seconds", source);
  const nlohmann::json best = field<nlohmann::json>(state, "best_cer", source);
  s.best_cer = best.is_null() ? std::numeric_limits<double>::infinity()
                              : field<double>(state, "best_cer", source);
  s.best_step = field<int64_t>(state, "best_step", source);
  s.world_size = field<int>(state, "world_size", source);
  s.accumulation = field<int>(state, "accumulation", source);
  s.threads = field<int>(state, "threads", source);
  s.config_hash = field<std::string>(state, "config_hash", source);
  s.train_manifest_hash = field<std::string>(state, "train_manifest_hash", source);
  s.valid_manifest_hash = field<std::string>(state, "valid_manifest_hash", source);
  s.tokenizer_file = field<std::string>(state, "tokenizer_file", source);
  s.cmvn_file = field<std::string>(state, "cmvn_file", source);
  if (s.step < 0 || s.epoch < 0 || s.batch_in_epoch < 0 || s.world_size < 1) {
    MPIASR_FAIL(ExitCode::kCheckpoint, source << " has impossible values: " << state.dump());
  }
  return s;
}

std::string tensors_to_safetensors(const NamedTensors& tensors,
                                   const std::map<std::string, std::string>& metadata) {
  std::vector<TensorRef> refs;
  refs.reserve(tensors.size());
  for (const auto& [name, tensor] : tensors) {
    refs.push_back(TensorRef::of(name, tensor.shape, tensor.data.data()));
  }
  std::map<std::string, std::string> all = metadata;
  all["format"] = "pt";
  return serialize_safetensors(refs, all);
}

NamedTensors tensors_from_safetensors(const std::string& bytes, const std::string& source) {
  SafetensorsView view = parse_safetensors(bytes, source);
  NamedTensors tensors;
  for (const auto& [name, tensor] : view.tensors) {
    tensors[name] = HostTensor{tensor.shape, tensor.to_vector<float>()};
  }
  return tensors;
}

CheckpointFiles make_checkpoint_files(const NamedTensors& model, const NamedTensors& optimizer,
                                      const TrainingState& state, const std::string& config_yaml,
                                      const std::string& tokenizer_path,
                                      const std::string& cmvn_path,
                                      const ConformerConfig& architecture) {
  CheckpointFiles files;
  files.files[kModelFile] =
      tensors_to_safetensors(model, {{"conformer", conformer_json(architecture)}});
  files.files[kOptimizerFile] = tensors_to_safetensors(optimizer);
  files.files[kConfigFile] = config_yaml;
  files.files[state.tokenizer_file] = read_file(tokenizer_path);
  if (!state.cmvn_file.empty()) files.files[state.cmvn_file] = read_file(cmvn_path);
  files.state = state.to_json();
  return files;
}

CheckpointLocation locate_checkpoint(const std::string& path, const CheckpointLog& log) {
  std::error_code error;
  if (!fs::is_directory(path, error)) {
    fail_file(ExitCode::kCheckpoint, "checkpoint", path, fs::exists(path) ? ENOTDIR : ENOENT);
  }
  const fs::path absolute = fs::absolute(path).lexically_normal();
  const fs::path dir = absolute.filename().empty() ? absolute.parent_path() : absolute;
  // A step folder: named like one, or holding a state.json. Its state.json
  // must name its step; read_checkpoint verifies the files when it is loaded.
  if (parse_step_name(dir.filename().string()) || fs::exists(dir / "state.json")) {
    const std::string root = dir.parent_path().string();
    nlohmann::json state;
    std::optional<std::string> problem = read_checkpoint_state(path, state);
    if (!problem && (!state.contains("step") || !state["step"].is_number_integer())) {
      problem = "state.json has no integer \"step\"";
    }
    if (problem) {
      // Point at an intact neighbour, if the folder has one.
      const std::optional<int64_t> intact = find_latest_intact(root, [](const std::string&) {});
      MPIASR_FAIL(ExitCode::kCheckpoint,
                  "checkpoint " << path << " is not intact: " << *problem
                                << (intact ? "; the newest intact checkpoint next to it is " +
                                                 checkpoint_dir(root, *intact)
                                           : std::string()));
    }
    const int64_t step = state["step"].get<int64_t>();
    if (!fs::equivalent(checkpoint_dir(root, step), path)) {
      MPIASR_FAIL(ExitCode::kCheckpoint, path << " holds step " << step << " but is not named "
                                              << fs::path(checkpoint_dir(root, step)).filename());
    }
    return {root, step, checkpoint_dir(root, step)};
  }
  if (fs::is_directory(fs::path(path) / "checkpoints") && !fs::exists(fs::path(path) / "latest")) {
    return locate_checkpoint(path + "/checkpoints", log);
  }
  for (const char* pointer : {"best", "latest"}) {
    std::optional<int64_t> step;
    try {
      step = read_checkpoint_pointer(path, pointer);
    } catch (const Error& e) {  // garbled: the checkpoints themselves may be fine
      log(std::string(e.what()) + "; looking for the newest intact checkpoint instead");
    }
    if (!step) continue;
    const std::string dir = checkpoint_dir(path, *step);
    if (std::optional<std::string> problem = checkpoint_problem(dir)) {
      log("checkpoint " + dir + " (" + pointer + ") is not intact: " + *problem);
      continue;
    }
    return {path, *step, dir};
  }
  if (std::optional<int64_t> step = find_latest_intact(path, log)) {
    return {path, *step, checkpoint_dir(path, *step)};
  }
  MPIASR_FAIL(ExitCode::kCheckpoint, "no intact checkpoint in "
                                         << path
                                         << " (give a step-NNNNNNNN folder, a checkpoint folder "
                                            "with best/latest pointers, or a training output "
                                            "folder holding checkpoints/)");
}

}  // namespace mpiasr
