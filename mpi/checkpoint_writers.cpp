#include "mpi/checkpoint_writers.h"

#include <algorithm>
#include <iostream>
#include <iterator>
#include <sstream>

#include "mpi/mpi_check.h"
#include "mpi/timeout.h"

namespace mpiasr::mpi {

namespace {

bool per_node_mode(const std::string& fs_mode) {
  if (fs_mode == "per-node") return true;
  if (fs_mode == "shared") return false;
  MPIASR_FAIL(ExitCode::kUsage,
              "checkpoint fs_mode '" << fs_mode << "' is not one of: shared, per-node");
}

// Every rank's list of steps (empty for ranks that are not writers).
std::vector<std::vector<int64_t>> gather_steps(const Context& ctx, std::vector<int64_t> steps) {
  const int size = ctx.world_size();
  std::vector<int> counts(static_cast<size_t>(size));
  const int count = int(steps.size());
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(
      MPI_Iallgather(&count, 1, MPI_INT, counts.data(), 1, MPI_INT, ctx.world_comm(), &request));
  wait_or_abort(ctx, request, "agree_resume_step");
  std::vector<int> offsets(size_t(size), 0);
  for (int rank = 1; rank < size; ++rank) {
    offsets[size_t(rank)] = offsets[size_t(rank - 1)] + counts[size_t(rank - 1)];
  }
  std::vector<int64_t> all(size_t(offsets.back() + counts.back()));
  MPI_CHECK(MPI_Iallgatherv(steps.data(), count, MPI_INT64_T, all.data(), counts.data(),
                            offsets.data(), MPI_INT64_T, ctx.world_comm(), &request));
  wait_or_abort(ctx, request, "agree_resume_step");
  std::vector<std::vector<int64_t>> per_rank(static_cast<size_t>(size));
  for (int rank = 0; rank < size; ++rank) {
    auto begin = all.begin() + offsets[size_t(rank)];
    per_rank[size_t(rank)].assign(begin, begin + counts[size_t(rank)]);
  }
  return per_rank;
}

}  // namespace

bool is_checkpoint_writer(const Context& ctx, const std::string& fs_mode) {
  return per_node_mode(fs_mode) ? ctx.is_node_leader() : ctx.is_main();
}

std::optional<int64_t> agree_resume_step(const Context& ctx, const std::string& fs_mode,
                                         const std::vector<int64_t>& local_intact_steps) {
  const bool per_node = per_node_mode(fs_mode);
  const bool writer = per_node ? ctx.is_node_leader() : ctx.is_main();
  std::vector<int64_t> mine = writer ? local_intact_steps : std::vector<int64_t>();
  std::sort(mine.begin(), mine.end());
  mine.erase(std::unique(mine.begin(), mine.end()), mine.end());
  const std::vector<std::vector<int64_t>> steps = gather_steps(ctx, mine);

  // Writers' lists, in node order for per-node (a node's writer is its
  // lowest world rank), or rank 0's alone for shared.
  std::vector<int> writers = {0};
  if (per_node) {
    std::vector<bool> seen(size_t(ctx.num_nodes()), false);
    seen[size_t(ctx.node_of(0))] = true;
    for (int rank = 1; rank < ctx.world_size(); ++rank) {
      if (seen[size_t(ctx.node_of(rank))]) continue;
      seen[size_t(ctx.node_of(rank))] = true;
      writers.push_back(rank);
    }
  }
  std::vector<int64_t> common = steps[size_t(writers.front())];
  int64_t newest = common.empty() ? -1 : common.back();
  for (int rank : writers) {
    const std::vector<int64_t>& theirs = steps[size_t(rank)];
    std::vector<int64_t> both;
    std::set_intersection(common.begin(), common.end(), theirs.begin(), theirs.end(),
                          std::back_inserter(both));
    common = std::move(both);
    if (!theirs.empty()) newest = std::max(newest, theirs.back());
  }
  std::optional<int64_t> chosen;
  if (!common.empty()) chosen = common.back();

  if (ctx.is_main() && newest >= 0 && chosen != newest) {
    for (int rank : writers) {
      const std::vector<int64_t>& theirs = steps[size_t(rank)];
      if (std::binary_search(theirs.begin(), theirs.end(), newest)) continue;
      std::ostringstream line;
      line << ctx.node_name(ctx.node_of(rank)) << " lacks step " << newest << "; ";
      if (chosen) {
        line << "resuming from " << *chosen;
      } else {
        line << "no step is intact on every node, starting from scratch";
      }
      std::cerr << line.str() << "\n";
    }
  }
  return chosen;
}

}  // namespace mpiasr::mpi
