// `mpiasr average CHECKPOINT... --out DIR`: a checkpoint whose model is the
// mean of the models of two or more checkpoints of one run
// (src/checkpoint_average.h), written as DIR/step-NNNNNNNN (the newest
// input's step) with DIR/best and DIR/latest pointing at it, so `eval` and
// `transcribe` take DIR as they take a run's checkpoints/ folder.
// Each CHECKPOINT is what `eval` accepts (a step folder, or a checkpoint
// folder whose best checkpoint is meant). DIR must be new or empty: writing a
// checkpoint prunes the others of its folder. Runs on world rank 0.
#include <filesystem>
#include <iostream>
#include <memory>

#include "io/checkpoint.h"
#include "src/base/error.h"
#include "src/checkpoint_average.h"
#include "src/commands.h"
#include "src/training_checkpoint.h"

namespace mpiasr {

namespace {

struct AverageOptions {
  std::vector<std::string> checkpoints;
  std::string out;
};

int run_average(const AverageOptions& options, const mpi::Context& ctx) {
  if (!ctx.is_main()) return 0;
  std::error_code error;
  if (std::filesystem::exists(options.out, error) &&
      !(std::filesystem::is_directory(options.out, error) &&
        std::filesystem::is_empty(options.out, error))) {
    MPIASR_FAIL(ExitCode::kUsage, "--out '" << options.out
                                            << "': exists and is not an empty folder (writing "
                                               "the average would prune its checkpoints)");
  }
  std::vector<CheckpointLocation> locations;
  for (const std::string& path : options.checkpoints) {
    locations.push_back(
        locate_checkpoint(path, [](const std::string& message) { std::cerr << message << "\n"; }));
  }
  const CheckpointFiles averaged = average_checkpoints(locations);
  const int64_t step = averaged.state.at("step").get<int64_t>();
  const std::string dir = write_checkpoint(options.out, step, averaged, 1, step);
  std::cout << "averaged " << locations.size() << " checkpoints (steps "
            << averaged.state.at("averaged_steps").dump() << ") into " << dir << "\n";
  return 0;
}

}  // namespace

Command add_average_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "average",
      "Average the weights of two or more checkpoints of one run into a new checkpoint (the "
      "newest one's step, config and tokenizer), for `eval` and `transcribe`.");
  auto options = std::make_shared<AverageOptions>();
  sub->add_option("checkpoints", options->checkpoints,
                  "the checkpoints: step folders (runs/x/checkpoints/step-NNNNNNNN), or "
                  "checkpoint folders whose best checkpoint is meant")
      ->required();
  sub->add_option("--out", options->out,
                  "the folder to write, new or empty (it gets step-NNNNNNNN, best and latest)")
      ->required();
  return {sub, [options](mpi::Context& ctx) { return run_average(*options, ctx); }};
}

}  // namespace mpiasr
