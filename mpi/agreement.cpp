#include "mpi/agreement.h"

#include <cstdio>
#include <sstream>
#include <vector>

#include "mpi/collectives.h"
#include "mpi/mpi_check.h"
#include "mpi/timeout.h"

namespace mpiasr::mpi {

namespace {

std::string hex(uint64_t value) {
  char text[17];
  std::snprintf(text, sizeof text, "%016llx", static_cast<unsigned long long>(value));
  return text;
}

}  // namespace

void check_agreement(const Context& ctx, const std::string& what, uint64_t hash) {
  std::vector<uint64_t> hashes(size_t(ctx.world_size()));
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Iallgather(&hash, 1, MPI_UINT64_T, hashes.data(), 1, MPI_UINT64_T, ctx.world_comm(),
                           &request));
  wait_or_abort(ctx, request, "check_agreement");

  std::vector<int> differing;
  for (int rank = 1; rank < ctx.world_size(); ++rank) {
    if (hashes[size_t(rank)] != hashes[0]) differing.push_back(rank);
  }
  if (differing.empty()) return;

  constexpr size_t kListed = 16;
  std::string ranks;
  for (size_t i = 0; i < differing.size() && i < kListed; ++i) {
    ranks += (i ? ", " : "") + std::to_string(differing[i]);
  }
  if (differing.size() > kListed) {
    ranks += " and " + std::to_string(differing.size() - kListed) + " more";
  }
  const int first = differing.front();
  std::ostringstream message;
  message << what << " differs between ranks: " << ctx.rank_name(first) << " has hash "
          << hex(hashes[size_t(first)]) << ", " << ctx.rank_name(0) << " has " << hex(hashes[0])
          << " (ranks that differ from rank 0: " << ranks << ") (" << __FILE__ << ":" << __LINE__
          << ")";
  throw CollectiveError(ExitCode::kDistributed, message.str());
}

}  // namespace mpiasr::mpi
