// broadcast_bytes and broadcast_file. Every rank regenerates the expected
// bytes from the same seed, so what arrives is checked against an
// independent copy. broadcast_file is checked where the file is missing,
// stale or already identical (left untouched), in a folder that does not
// exist yet, and for a root that cannot read it. With one disk per node
// (scripts/mpirun-fake-nodes.sh) the missing and stale cases happen on other
// nodes' disks; with one shared disk only the root's copy exists.
#include "mpi/broadcast.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include "mpi/collectives.h"
#include "mpi/run_on.h"
#include "src/base/error.h"
#include "tests/mpi/mpi_test_util.h"

namespace mpiasr::mpi {
namespace {

using namespace test;
namespace fs = std::filesystem;

std::string random_bytes(size_t size, uint32_t seed) {
  std::mt19937 generator(seed);
  std::string bytes(size, '\0');
  for (char& c : bytes) c = char(generator() & 0xff);
  return bytes;
}

std::string file_contents(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

TEST(BroadcastBytes, SizesFromZeroToMegabytesFromAnyRoot) {
  Context ctx = test_context();
  for (int root : {0, ctx.world_size() - 1}) {
    for (size_t size : {size_t(0), size_t(1), size_t(1000), size_t(3) << 20}) {
      const std::string expected = random_bytes(size, uint32_t(size + 17 * root));
      const std::string sent = ctx.world_rank() == root ? expected : "ignored on other ranks";
      const std::string received = broadcast_bytes(ctx, sent, root);
      ASSERT_EQ(received.size(), size) << "root " << root;
      ASSERT_TRUE(received == expected) << "root " << root << ", " << size << " bytes";
    }
  }
  EXPECT_THROW(broadcast_bytes(ctx, "x", ctx.world_size()), Error);
}

TEST(BroadcastFile, ReachesEveryNodeAndLeavesIdenticalCopiesAlone) {
  Context ctx = test_context();
  const fs::path dir = node_scratch("broadcast_file");
  const fs::path stale = dir / "stale.model";          // other nodes hold an old version
  const fs::path missing = dir / "new" / "cmvn.json";  // other nodes lack it and its folder
  const std::string contents = random_bytes(100000, 5);
  run_on_main(ctx, [&] {
    fs::create_directories(missing.parent_path());
    std::ofstream(stale, std::ios::binary) << contents;
    std::ofstream(missing, std::ios::binary) << contents;
  });
  // A node whose disk does not show rank 0's files gets a stale copy.
  const bool sees_root_disk = fs::exists(stale);
  barrier(ctx, "disks checked");  // before any node writes its stale copy
  run_once_per_node(ctx, [&] {
    if (sees_root_disk) return;
    fs::create_directories(dir);
    std::ofstream(stale, std::ios::binary) << "old tokenizer";
  });
  if (std::getenv("NODE_DISK") && ctx.node_index() != ctx.node_of(0)) {
    EXPECT_FALSE(sees_root_disk) << "fake nodes should not share a disk";
  }
  struct stat before {};
  if (ctx.is_main()) {
    ASSERT_EQ(stat(stale.c_str(), &before), 0);
  }

  broadcast_file(ctx, stale.string());
  broadcast_file(ctx, missing.string());

  EXPECT_TRUE(file_contents(stale) == contents) << "rank " << ctx.world_rank();
  EXPECT_TRUE(file_contents(missing) == contents) << "rank " << ctx.world_rank();
  if (ctx.is_main()) {
    struct stat after {};
    ASSERT_EQ(stat(stale.c_str(), &after), 0);
    EXPECT_EQ(after.st_ino, before.st_ino) << "the identical copy on rank 0 was rewritten";
  }
  // No temporary files are left behind.
  for (const auto& entry : fs::recursive_directory_iterator(dir)) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
  }
  barrier(ctx, "files checked");
  run_once_per_node(ctx, [&] {
    std::error_code ignored;  // with a shared disk, leaders remove the same folder
    fs::remove_all(dir, ignored);
  });
}

TEST(BroadcastFile, FromAnotherRoot) {
  Context ctx = test_context();
  const int root = ctx.world_size() - 1;
  const fs::path dir = node_scratch("broadcast_file_root");
  const fs::path path = dir / "vocab.txt";
  const std::string contents = "a\nb\nc\n";
  if (ctx.world_rank() == root) {
    fs::create_directories(dir);
    std::ofstream(path, std::ios::binary) << contents;
  }
  broadcast_file(ctx, path.string(), root);
  EXPECT_EQ(file_contents(path), contents);
  barrier(ctx, "files checked");
  run_once_per_node(ctx, [&] {
    std::error_code ignored;  // with a shared disk, leaders remove the same folder
    fs::remove_all(dir, ignored);
  });
}

TEST(BroadcastFile, UnreadableOnRootStopsEveryRank) {
  Context ctx = test_context();
  const std::string path = "/nonexistent-mpiasr-folder/tokenizer.model";
  try {
    broadcast_file(ctx, path);
    ADD_FAILURE() << "rank " << ctx.world_rank() << " did not throw";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
    const std::string message = e.what();
    EXPECT_NE(message.find(ctx.rank_name(0) + " cannot read '" + path + "'"), std::string::npos)
        << message;
  }
}

}  // namespace
}  // namespace mpiasr::mpi

#include "tests/mpi/mpi_test_main.h"
