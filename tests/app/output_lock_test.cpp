// The lock of output.dir through train() and lock_output_dir (a world of
// one rank): a folder another process holds stops train and prepare before
// anything is written, with exit 7 on every rank (a CollectiveError) and a
// message naming the folder and the holder; a lock its holder left behind
// is taken over, said on stderr, and released (emptied) when training ends.
#include "src/output_lock.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/file.h>

#include <chrono>
#include <filesystem>
#include <set>
#include <sstream>
#include <thread>

#include "mpi/collectives.h"
#include "src/base/file.h"
#include "src/trainer.h"
#include "tests/app/training_fixture.h"

namespace mpiasr {
namespace {

using testing::fresh_dir;
using testing::tiny_config;

const auto* const kMpi = ::testing::AddGlobalTestEnvironment(new testing::MpiEnvironment);

const LockHolder kOther{"train", "nodeX", 4242, "2026-12-04 23:44:10 +0100", "nodeX 4240"};

std::set<std::string> entries(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(dir)) {
    names.insert(std::filesystem::relative(entry.path(), dir).string());
  }
  return names;
}

// The CollectiveError that f throws, or a failure when it throws none.
template <typename F>
mpi::CollectiveError collective_error_of(F&& f) {
  try {
    f();
  } catch (const mpi::CollectiveError& e) {
    return e;
  }
  ADD_FAILURE() << "no CollectiveError";
  return mpi::CollectiveError(ExitCode::kOk, "");
}

// Another process's lock, as flock sees it: a second open of the file.
TEST(OutputLock, AFolderInUseStopsTrainAndPrepareBeforeTheyWrite) {
  const std::string dir = fresh_dir("lock_in_use");
  const Config config = tiny_config(dir);
  const LockFile other(dir + "/" + kOutputLockFile, kOther, ExitCode::kUsage);
  ASSERT_EQ(other.state(), LockFile::State::kHeld);
  mpi::Context ctx = mpi::Context::world();
  const std::string expected =
      "output.dir '" + dir +
      "' is in use by mpiasr train on host nodeX, process 4242, started 2026-12-04 23:44:10 "
      "+0100 (its lock file " +
      dir + "/mpiasr.lock): wait for that run to end, or give this one another output.dir";

  std::ostringstream log;
  const mpi::CollectiveError trained =
      collective_error_of([&] { train(config, ctx, TrainOptions{}, log); });
  EXPECT_EQ(trained.code(), ExitCode::kOutputInUse);
  EXPECT_EQ(std::string(trained.what()).rfind(expected, 0), 0u) << trained.what();
  const mpi::CollectiveError prepared =
      collective_error_of([&] { lock_output_dir(config, ctx, "prepare"); });
  EXPECT_EQ(prepared.code(), ExitCode::kOutputInUse);
  EXPECT_EQ(std::string(prepared.what()).rfind(expected, 0), 0u) << prepared.what();
  EXPECT_EQ(entries(dir), std::set<std::string>{"mpiasr.lock"});
  EXPECT_EQ(read_file(dir + "/mpiasr.lock"), kOther.record());
}

// A run that looks after its rival took the lock but before the rival wrote
// its record (both started at once) waits for the record, and names it.
TEST(OutputLock, ARefusalWaitsForTheHoldersRecord) {
  const std::string dir = fresh_dir("lock_unrecorded");
  const Config config = tiny_config(dir);
  const std::string path = dir + "/" + kOutputLockFile;
  const FileDescriptor rival = open_file(path, O_RDWR | O_CREAT, ExitCode::kUsage);
  ASSERT_EQ(::flock(rival.get(), LOCK_EX | LOCK_NB), 0);
  std::thread recorder([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    write_all(rival, kOther.record(), path, ExitCode::kUsage);
  });
  mpi::Context ctx = mpi::Context::world();
  const mpi::CollectiveError refused =
      collective_error_of([&] { lock_output_dir(config, ctx, "prepare"); });
  recorder.join();
  EXPECT_EQ(refused.code(), ExitCode::kOutputInUse);
  EXPECT_NE(std::string(refused.what())
                .find("is in use by mpiasr train on host nodeX, process 4242, started "
                      "2026-12-04 23:44:10 +0100 (its lock file " +
                      path + ")"),
            std::string::npos)
      << refused.what();
}

TEST(OutputLock, AStaleLockIsTakenOverAndReleasedAtTheEnd) {
  const std::string dir = fresh_dir("lock_stale");
  const Config config = tiny_config(dir);
  write_file(dir + "/" + kOutputLockFile, kOther.record(), ExitCode::kUsage);
  mpi::Context ctx = mpi::Context::world();
  std::ostringstream log;
  ::testing::internal::CaptureStderr();
  const TrainResult result = train(config, ctx, TrainOptions{}, log);
  const std::string errors = ::testing::internal::GetCapturedStderr();
  EXPECT_TRUE(result.finished);
  EXPECT_NE(errors.find("rank 0 (" + ctx.hostname() + "): output.dir '" + dir +
                        "': took over the lock " + dir +
                        "/mpiasr.lock of mpiasr train on host nodeX, process 4242, started "
                        "2026-12-04 23:44:10 +0100, which ended without releasing it (killed, "
                        "or its node lost)\n"),
            std::string::npos)
      << errors;
  EXPECT_EQ(read_file(dir + "/mpiasr.lock"), "");
}

}  // namespace
}  // namespace mpiasr
