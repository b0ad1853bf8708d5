#include "mpi/collectives.h"

#include <cstdint>
#include <type_traits>

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

void allreduce_inplace(const Context& ctx, double* values, int n, MPI_Op op, const char* op_name) {
  MPIASR_CHECK(n >= 0, op_name << ": negative count " << n);
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Iallreduce(MPI_IN_PLACE, values, n, MPI_DOUBLE, op, ctx.world_comm(), &request));
  wait_or_abort(ctx, request, op_name);
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
  allreduce_inplace(ctx, values, n, MPI_SUM, op_name);
}

void allreduce_min_inplace(const Context& ctx, double* values, int n, const char* op_name) {
  allreduce_inplace(ctx, values, n, MPI_MIN, op_name);
}

void barrier(const Context& ctx, const char* op_name) {
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ibarrier(ctx.world_comm(), &request));
  wait_or_abort(ctx, request, op_name);
}

template <typename T>
std::vector<T> gather_to_receivers(const Context& ctx, const std::vector<T>& mine, bool receive,
                                   const char* op_name) {
  const MPI_Datatype type = std::is_same_v<T, double> ? MPI_DOUBLE : MPI_FLOAT;
  const int world = ctx.world_size();
  std::vector<int> receivers(size_t(world), 0);
  const int me = receive ? 1 : 0;
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(
      MPI_Iallgather(&me, 1, MPI_INT, receivers.data(), 1, MPI_INT, ctx.world_comm(), &request));
  wait_or_abort(ctx, request, op_name);
  const int64_t count = int64_t(mine.size());
  MPIASR_CHECK(allreduce_min(ctx, count, op_name) == allreduce_max(ctx, count, op_name),
               op_name << ": ranks gather different lengths");
  MPIASR_CHECK(count <= INT32_MAX, op_name << ": " << count << " elements exceed MPI's count");
  std::vector<T> all(receive ? mine.size() * size_t(world) : 0);
  for (int root = 0; root < world; ++root) {
    if (!receivers[size_t(root)]) continue;
    MPI_CHECK(MPI_Igather(mine.data(), int(count), type, all.data(), int(count), type, root,
                          ctx.world_comm(), &request));
    wait_or_abort(ctx, request, op_name);
  }
  return all;
}

template std::vector<float> gather_to_receivers(const Context&, const std::vector<float>&, bool,
                                                const char*);
template std::vector<double> gather_to_receivers(const Context&, const std::vector<double>&, bool,
                                                 const char*);

int first_failing_rank(const Context& ctx, bool failed, const char* op_name) {
  const int64_t none = ctx.world_size();
  const int64_t first = allreduce_min(ctx, failed ? ctx.world_rank() : none, op_name);
  return first == none ? -1 : int(first);
}

}  // namespace mpiasr::mpi
