#include "mpi/collectives.h"

#include "mpi/mpi_check.h"
#include "mpi/timeout.h"

namespace mpiasr::mpi {

namespace {

template <typename T>
T allreduce_one(const Context& ctx, T value, MPI_Datatype type, MPI_Op op, const char* op_name) {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, &value, 1, type, op, ctx.world_comm(), &request));
  wait_or_abort(ctx, request, op_name);
  return value;
}

}  // namespace

double allreduce_sum(const Context& ctx, double value, const char* op_name) {
  return allreduce_one(ctx, value, MPI_DOUBLE, MPI_SUM, op_name);
}

int64_t allreduce_min(const Context& ctx, int64_t value, const char* op_name) {
  return allreduce_one(ctx, value, MPI_INT64_T, MPI_MIN, op_name);
}

int64_t allreduce_max(const Context& ctx, int64_t value, const char* op_name) {
  return allreduce_one(ctx, value, MPI_INT64_T, MPI_MAX, op_name);
}

void allreduce_sum_inplace(const Context& ctx, double* values, int n, const char* op_name) {
  MPIASR_CHECK(n >= 0, op_name << ": negative count " << n);
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(
      MPI_Iallreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, MPI_SUM, ctx.world_comm(), &request));
  wait_or_abort(ctx, request, op_name);
}

void barrier(const Context& ctx, const char* op_name) {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ibarrier(ctx.world_comm(), &request));
  wait_or_abort(ctx, request, op_name);
}

int first_failing_rank(const Context& ctx, bool failed, const char* op_name) {
  const int64_t none = ctx.world_size();
  const int64_t first = allreduce_min(ctx, failed ? ctx.world_rank() : none, op_name);
  return first == none ? -1 : int(first);
}

}  // namespace mpiasr::mpi
