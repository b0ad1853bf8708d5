#include "mpi/broadcast.h"

#include <algorithm>
#include <cstdint>
#include <filesystem>

#include "mpi/collectives.h"
#include "mpi/mpi_check.h"
#include "mpi/timeout.h"
#include "src/base/file.h"

namespace mpiasr::mpi {

namespace fs = std::filesystem;

std::string broadcast_bytes(const Context& ctx, const std::string& bytes, int root) {
  MPIASR_CHECK(root >= 0 && root < ctx.world_size(),
               "broadcast root " << root << " is not a rank of " << ctx.world_size());
  uint64_t length = ctx.world_rank() == root ? bytes.size() : 0;
  MPI_Request request = MPI_REQUEST_NULL;
  MPI_CHECK(MPI_Ibcast(&length, 1, MPI_UINT64_T, root, ctx.world_comm(), &request));
  wait_or_abort(ctx, request, "broadcast_bytes");

  std::string received = ctx.world_rank() == root ? bytes : std::string(length, '\0');
  constexpr uint64_t kChunk = uint64_t(1) << 30;
  for (uint64_t offset = 0; offset < length; offset += kChunk) {
    const int count = int(std::min(kChunk, length - offset));
    MPI_CHECK(
        MPI_Ibcast(received.data() + offset, count, MPI_BYTE, root, ctx.world_comm(), &request));
    wait_or_abort(ctx, request, "broadcast_bytes");
  }
  return received;
}

void broadcast_file(const Context& ctx, const std::string& path, int root) {
  // Root sends why it could not read the file ("" when it could), then the file.
  std::string contents;
  std::string read_error;
  if (ctx.world_rank() == root) {
    try {
      contents = read_file(path);
    } catch (const std::exception& e) {
      read_error = e.what();
    }
  }
  read_error = broadcast_bytes(ctx, read_error, root);
  if (!read_error.empty()) {
    MPIASR_FAIL(ExitCode::kBadInput, "broadcast_file: " << ctx.rank_name(root) << " cannot read '"
                                                        << path << "': " << read_error);
  }
  contents = broadcast_bytes(ctx, contents, root);

  std::string error;
  if (ctx.is_node_leader()) {
    try {
      const bool same = fs::is_regular_file(path) && read_file(path) == contents;
      if (!same) {
        const fs::path parent = fs::path(path).parent_path();
        if (!parent.empty()) make_folders(parent.string(), "folder", ExitCode::kDistributed);
        write_file_atomic(path, contents);
      }
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  const int failed = first_failing_rank(ctx, !error.empty(), "broadcast_file");
  if (failed < 0) return;
  MPIASR_FAIL(ExitCode::kDistributed,
              "broadcast_file: " << ctx.rank_name(failed) << " cannot write '" << path << "'"
                                 << (error.empty() ? std::string() : ": " + error));
}

}  // namespace mpiasr::mpi
