// `mpiasr train CONFIG.yaml [--section.key=value ...]`.
#include <iostream>
#include <memory>

#include "src/base/error.h"
#include "src/commands.h"
#include "src/config.h"
#include "src/stop_signal.h"
#include "src/trainer.h"

namespace mpiasr {

std::string overrides_help() {
  std::string text =
      "Any config key can be set on the command line after the config file, as "
      "--section.key=value or --section.key value (a later one wins; unknown keys are "
      "rejected with the nearest valid key). Keys:\n";
  std::string section;
  for (const std::string& key : config_keys()) {
    const size_t dot = key.find('.');
    if (key.substr(0, dot) != section) {
      section = key.substr(0, dot);
      text += "\n  " + section + ":";
    }
    text += " " + key.substr(dot + 1);
  }
  return text + "\n";
}

Command add_train_command(CLI::App& app) {
  CLI::App* sub = app.add_subcommand(
      "train",
      "Train a Conformer-CTC model as CONFIG.yaml says, resuming from the newest intact "
      "checkpoint of checkpoint.dir. Run under mpirun or srun for data-parallel training.");
  auto config_path = std::make_shared<std::string>();
  auto options = std::make_shared<TrainOptions>();
  sub->add_option("config", *config_path, "the config file (YAML); see scripts/configs/")
      ->required();
  sub->add_option("--stop-at-step", options->stop_at_step,
                  "stop with a checkpoint after this step, as a preemption would; running the "
                  "same command again resumes (0: write the initialized model as step 0)")
      ->check(CLI::NonNegativeNumber);
  sub->allow_extras();
  sub->footer(overrides_help() +
              "\nOutput: progress lines on stdout, metrics as JSON lines in output.metrics_file, "
              "checkpoints in checkpoint.dir every checkpoint.every_steps, at every improved "
              "validation (the best by validation CER is checkpoint.dir/best), at the end and "
              "when stopped; checkpoint.every_steps=0 writes the last step's only. "
              "output.diagnostic_steps=N adds a \"diagnostics\" line for each of the first N "
              "steps: the learning rate applied, the mean blank posterior and the share of "
              "frames where the blank wins, the blank's output bias and its gradient, and the "
              "gradient norm of the subsampling, each block and the head (docs/training.md)."
              "\nThe first Ctrl-C or SIGTERM finishes the step, writes a checkpoint and exits "
              "with 128 + the signal; a second one ends the process at once."
              "\nExit codes: 0 done, 2 bad command line or config, or an output file that cannot "
              "be written, 3 bad input data, 4 checkpoint problem, 5 ranks disagree or a "
              "collective timed out, 6 training diverged, 7 output.dir in use by another run "
              "(train and prepare hold output.dir/mpiasr.lock while they run; a lock left by a "
              "killed run is taken over).");
  return {sub, [sub, config_path, options](mpi::Context& ctx) {
            const Config config = load_config(*config_path, sub->remaining());
            StopSignals signals;
            const TrainResult result = train(config, ctx, *options, std::cout);
            return result.stop_signal ? 128 + result.stop_signal : 0;
          }};
}

}  // namespace mpiasr
