#include "mpi/run_on.h"

#include <exception>

#include "mpi/collectives.h"
#include "src/base/error.h"

namespace mpiasr::mpi {

namespace {

void run_where(const Context& ctx, bool here, const std::function<void()>& f, const char* op_name) {
  std::exception_ptr error;
  if (here) {
    try {
      f();
    } catch (...) {
      error = std::current_exception();
    }
  }
  const int failed = first_failing_rank(ctx, error != nullptr, op_name);
  if (failed < 0) return;
  if (error) std::rethrow_exception(error);
  MPIASR_FAIL(ExitCode::kDistributed,
              op_name << " failed on " << ctx.rank_name(failed) << "; that rank reports why");
}

}  // namespace

void run_on_main(const Context& ctx, const std::function<void()>& f) {
  run_where(ctx, ctx.is_main(), f, "run_on_main");
}

void run_once_per_node(const Context& ctx, const std::function<void()>& f) {
  run_where(ctx, ctx.is_node_leader(), f, "run_once_per_node");
}

}  // namespace mpiasr::mpi
