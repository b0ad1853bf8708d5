// The mpiasr program: parses the subcommand and runs it on the MPI world.
// Errors become one message on stderr (prefixed with the rank when there are
// several) and the exit code of their kind (src/base/error.h); with several ranks
// the failing rank aborts the job, so no rank waits on it, unless every rank
// raised the error together (mpi::CollectiveError).
#include <mpi.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <sstream>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/simd.h"
#include "mpi/collectives.h"
#include "mpi/context.h"
#include "mpi/runtime.h"
#include "src/base/error.h"
#include "src/build_info.h"
#include "src/commands.h"
#include "src/config.h"

namespace {

// Settings that libraries read once, as they are loaded, before main(): when
// one is missing, the program sets it and runs itself again (execv keeps the
// process, so launchers see nothing; run on as is if it fails).
//  - OMP_WAIT_POLICY=passive and GOMP_SPINCOUNT=10000, unless the user set
//    either: OpenMP threads that spin long while they wait take the cores
//    that the loader threads and the other ranks need (training `tiny` on 2
//    cores ran 10-20x slower with libgomp's default waits, which spin for
//    milliseconds), but a thread that sleeps at once at the end of every
//    parallel region must be woken for the next, 0.1-0.2 ms on a virtual
//    machine, and the `small` step runs about 500 regions. 10,000 pauses,
//    about 0.25 ms on an AMD EPYC, keep the team awake between the regions
//    of one layer: that step ran 1.06-1.10x faster on 2 threads (measured
//    for commit 85631ac).
//  - OPENBLAS_CORETYPE, unless the user set it, when OpenBLAS took this CPU
//    for a generic one (kernels/cpu/gemm.h, openblas_core_to_request; the
//    `small` step ran 3.2x faster with it on an Emerald Rapids Xeon). The
//    core OpenBLAS chose is kept in MPIASR_OPENBLAS_CHOSE for the backend's
//    description.
void set_library_settings(char** argv) {
  bool changed = false;
  if (!std::getenv("OMP_WAIT_POLICY") && !std::getenv("GOMP_SPINCOUNT")) {
    setenv("OMP_WAIT_POLICY", "passive", /*overwrite=*/1);
    setenv("GOMP_SPINCOUNT", "10000", /*overwrite=*/1);
    changed = true;
  }
  if (!std::getenv("OPENBLAS_CORETYPE")) {
    const std::string core = mpiasr::openblas_core_to_request();
    if (!core.empty()) {
      setenv("MPIASR_OPENBLAS_CHOSE", mpiasr::openblas_core().c_str(), /*overwrite=*/1);
      setenv("OPENBLAS_CORETYPE", core.c_str(), /*overwrite=*/1);
      changed = true;
    }
  }
  if (!changed) return;
  // The program's own path, not /proc/self/exe, so that ps and top still
  // name the process after it.
  std::error_code error;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", error);
  execv(error ? "/proc/self/exe" : self.c_str(), argv);
}

int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// Prints the error as one line (one write, so the lines of several ranks do
// not interleave). With several ranks, an error of this rank alone aborts the
// job, so no rank waits for it; an error every rank raises together
// (`on_every_rank`) ends each rank normally, after every one has printed.
int report(const std::string& command, const char* what, int code, bool on_every_rank) {
  std::ostringstream line;
  line << "mpiasr " << command << ": ";
  if (world_size() > 1) line << "rank " << world_rank() << ": ";
  line << "error: " << what << "\n";
  std::cerr << line.str() << std::flush;
  if (world_size() > 1 && !on_every_rank) MPI_Abort(MPI_COMM_WORLD, code);
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  using mpiasr::ExitCode;
  set_library_settings(argv);
  // MPIASR_SIMD (kernels/cpu/simd.h), checked before any kernel runs.
  try {
    mpiasr::simd_level();
  } catch (const mpiasr::Error& e) {
    std::cerr << "mpiasr: error: " << e.what() << "\n";
    return int(e.code());
  }
  CLI::App app{"mpiasr: Conformer-CTC speech recognition trained data-parallel over MPI"};
  app.require_subcommand(1);
  app.set_version_flag(
      "--version", [] { return mpiasr::version_text(); },
      "print the version, the commit and what the build holds (CUDA, MPI, BLAS)");
  app.footer(
      "Run `mpiasr COMMAND --help` for a command's options. Exit codes: 0 success, 1 internal "
      "error, 2 bad command line or config, or an output file that cannot be written, 3 bad "
      "input data, 4 checkpoint problem, 5 distributed failure, 6 training diverged, 7 "
      "output.dir in use by another run.");
  const std::vector<mpiasr::Command> commands = {
      mpiasr::add_import_command(app),     mpiasr::add_prepare_command(app),
      mpiasr::add_train_command(app),      mpiasr::add_eval_command(app),
      mpiasr::add_transcribe_command(app), mpiasr::add_lm_command(app),
      mpiasr::add_average_command(app)};
  // CLI11 calls an unknown first word a missing subcommand; name it instead.
  std::vector<std::string> names;
  std::string listed;
  for (const mpiasr::Command& command : commands) {
    names.push_back(command.app->get_name());
    listed += (listed.empty() ? "" : ", ") + names.back();
  }
  if (argc > 1 && argv[1][0] != '-' &&
      std::find(names.begin(), names.end(), argv[1]) == names.end()) {
    const std::string nearest = mpiasr::nearest_name(argv[1], names);
    std::cerr << "mpiasr: error: unknown command '" << argv[1] << "'"
              << (nearest.empty() ? "" : "; did you mean '" + nearest + "'?")
              << " (commands: " << listed << ")\n";
    return int(ExitCode::kUsage);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);
    return code == 0 ? 0 : int(ExitCode::kUsage);
  }

  mpiasr::mpi::Runtime runtime(&argc, &argv);
  for (const mpiasr::Command& command : commands) {
    if (!command.app->parsed()) continue;
    const std::string name = command.app->get_name();
    try {
      mpiasr::mpi::Context ctx = mpiasr::mpi::Context::world();
      return command.run(ctx);
    } catch (const mpiasr::mpi::CollectiveError& e) {
      return report(name, e.what(), int(e.code()), /*on_every_rank=*/true);
    } catch (const mpiasr::Error& e) {
      return report(name, e.what(), int(e.code()), /*on_every_rank=*/false);
    } catch (const std::exception& e) {
      return report(name, e.what(), int(ExitCode::kFailure), /*on_every_rank=*/false);
    }
  }
  return int(ExitCode::kUsage);
}
