// Small collectives over the world communicator, each with the context's
// timeout (timeout.h): started non-blocking, polled until done, and on
// timeout the job is aborted with a message naming rank, step and op_name.
// All ranks must call them in the same order with the same op_name.
#pragma once

#include <cstdint>
#include <vector>

#include "mpi/context.h"
#include "src/base/error.h"

namespace mpiasr::mpi {

double allreduce_sum(const Context& ctx, double value, const char* op_name);
int64_t allreduce_min(const Context& ctx, int64_t value, const char* op_name);
int64_t allreduce_max(const Context& ctx, int64_t value, const char* op_name);
// values[0..n) becomes the element-wise sum (minimum) over ranks.
void allreduce_sum_inplace(const Context& ctx, double* values, int n, const char* op_name);
void allreduce_min_inplace(const Context& ctx, double* values, int n, const char* op_name);
void barrier(const Context& ctx, const char* op_name);

// Every rank gives `mine` (the same length on every rank); the ranks with
// `receive` get every rank's, one after the other in rank order, and the
// others an empty vector (one gather per receiving rank). T: float or double.
template <typename T>
std::vector<T> gather_to_receivers(const Context& ctx, const std::vector<T>& mine, bool receive,
                                   const char* op_name);

// Every rank says whether it failed; returns the lowest failing world rank,
// or -1 when none failed. Lets all ranks stop together, naming the culprit.
int first_failing_rank(const Context& ctx, bool failed, const char* op_name);

// An Error that every rank raises together, with the same message, from the
// outcome of a collective (check_agreement). Since no rank is left waiting,
// the program ends each rank with the message and the code instead of
// aborting the job, which could kill ranks before they print.
class CollectiveError : public Error {
 public:
  using Error::Error;
};

}  // namespace mpiasr::mpi
