// The mpiasr program: parses the subcommand and runs it; errors become a
// message on stderr and the exit code of their kind.
#include <CLI/CLI.hpp>

#include <iostream>

#include "src/error.h"

int main(int argc, char** argv) {
  CLI::App app{"mpiasr: Conformer-CTC speech recognition trained data-parallel over MPI"};
  app.require_subcommand(0, 1);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  std::cout << app.help();
  return 0;
}
