// The subcommands of the mpiasr program: import, prepare, train, eval,
// transcribe, lm, average.
// Each adds itself to the CLI11 app (its options and --help) and returns the
// function that runs it after parsing, on the MPI world, returning the exit
// code. Failures throw Error; main() turns them into the code of their kind.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

#include "mpi/context.h"

namespace mpiasr {

struct Command {
  CLI::App* app = nullptr;
  std::function<int(mpi::Context&)> run;
};

Command add_train_command(CLI::App& app);
Command add_eval_command(CLI::App& app);
Command add_transcribe_command(CLI::App& app);
Command add_prepare_command(CLI::App& app);
Command add_lm_command(CLI::App& app);
Command add_average_command(CLI::App& app);
Command add_import_command(CLI::App& app);

// Text for a subcommand's --help: how config overrides are written and every
// key, section by section.
std::string overrides_help();

}  // namespace mpiasr
