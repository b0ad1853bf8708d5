// Checkpoint averaging; see checkpoint_average.h.
#include "src/checkpoint_average.h"

#include <algorithm>
#include <optional>
#include <set>

#include "io/safetensors.h"
#include "src/base/error.h"

namespace mpiasr {

CheckpointFiles average_checkpoints(const std::vector<CheckpointLocation>& checkpoints) {
  std::vector<CheckpointLocation> sorted = checkpoints;
  std::sort(
      sorted.begin(), sorted.end(),
      [](const CheckpointLocation& a, const CheckpointLocation& b) { return a.step < b.step; });
  for (size_t k = 1; k < sorted.size(); ++k) {
    if (sorted[k].step == sorted[k - 1].step)
      MPIASR_FAIL(ExitCode::kCheckpoint, "checkpoint averaging: step "
                                             << sorted[k].step << " given twice ("
                                             << sorted[k - 1].dir << ", " << sorted[k].dir << ")");
  }
  if (sorted.size() < 2)
    MPIASR_FAIL(ExitCode::kCheckpoint,
                "checkpoint averaging needs at least two checkpoints, got " << sorted.size());

  const CheckpointLocation& newest = sorted.back();
  CheckpointFiles result = read_checkpoint(newest.root, newest.step);
  const std::string reference_model = result.files.at(kModelFile);
  const SafetensorsView reference =
      parse_safetensors(reference_model, newest.dir + "/" + kModelFile);
  // The files that must agree: the tokenizer and the CMVN statistics.
  const TrainingState reference_state = TrainingState::from_json(result.state, newest.dir);
  std::set<std::string> shared_files = {reference_state.tokenizer_file};
  if (!reference_state.cmvn_file.empty()) shared_files.insert(reference_state.cmvn_file);

  std::map<std::string, std::vector<double>> sums;
  nlohmann::json steps = nlohmann::json::array();
  for (const CheckpointLocation& where : sorted) {
    std::optional<CheckpointFiles> older;
    const CheckpointFiles& files =
        where.step == newest.step ? result : older.emplace(read_checkpoint(where.root, where.step));
    const std::string source = where.dir + "/" + kModelFile;
    const SafetensorsView model = parse_safetensors(files.files.at(kModelFile), source);
    const auto differ = [&](const std::string& what) {
      MPIASR_FAIL(ExitCode::kCheckpoint, "checkpoint averaging: " << where.dir << " and "
                                                                  << newest.dir << " differ in "
                                                                  << what);
    };
    if (model.metadata != reference.metadata)
      differ("the architecture (" + std::string(kModelFile) + " metadata)");
    for (const std::string& name : shared_files) {
      if (!files.files.contains(name) || files.files.at(name) != result.files.at(name))
        differ(name);
    }
    if (model.tensors.size() != reference.tensors.size()) differ("the number of tensors");
    for (const auto& [name, tensor] : reference.tensors) {
      const auto found = model.tensors.find(name);
      if (found == model.tensors.end()) differ("tensors: '" + name + "' is missing");
      if (found->second.shape != tensor.shape) differ("the shape of '" + name + "'");
      const std::vector<float> values = found->second.to_vector<float>();
      std::vector<double>& sum = sums[name];
      sum.resize(values.size(), 0.0);
      for (size_t i = 0; i < values.size(); ++i) sum[i] += values[i];
    }
    steps.push_back(where.step);
  }

  NamedTensors mean;
  const double count = static_cast<double>(sorted.size());
  for (const auto& [name, sum] : sums) {
    HostTensor& tensor = mean[name];
    tensor.shape = reference.tensors.at(name).shape;
    tensor.data.resize(sum.size());
    for (size_t i = 0; i < sum.size(); ++i) tensor.data[i] = static_cast<float>(sum[i] / count);
  }
  std::map<std::string, std::string> metadata = reference.metadata;
  metadata.erase("format");  // tensors_to_safetensors writes it
  result.files[kModelFile] = tensors_to_safetensors(mean, metadata);
  result.state["averaged_steps"] = steps;
  return result;
}

}  // namespace mpiasr
