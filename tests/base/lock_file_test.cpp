// The lock file: one holder at a time, its record readable by the others;
// released, it is empty and free; a holder killed with SIGKILL leaves it
// free, and the next taker learns who held it; a file that cannot be made
// says why.
#include "src/base/lock_file.h"
#include "tests/base/temp_dir.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <regex>
#include <string>

#include "src/base/file.h"

namespace mpiasr {
namespace {

LockHolder holder(const std::string& host, int64_t pid) {
  return {"train", host, pid, "2026-12-04 23:44:10 +0100", host + " 1"};
}

void expect_same(const std::optional<LockHolder>& found, const LockHolder& expected) {
  ASSERT_TRUE(found.has_value());
  EXPECT_EQ(found->command, expected.command);
  EXPECT_EQ(found->host, expected.host);
  EXPECT_EQ(found->pid, expected.pid);
  EXPECT_EQ(found->started, expected.started);
  EXPECT_EQ(found->run, expected.run);
}

TEST(LockHolder, RecordReadsBackAndDescribesTheHolder) {
  const LockHolder a = holder("nodeA", 4242);
  EXPECT_EQ(a.record(),
            "command: train\nhost: nodeA\npid: 4242\nstarted: 2026-12-04 23:44:10 +0100\n"
            "run: nodeA 1\n");
  expect_same(LockHolder::parse(a.record()), a);
  EXPECT_EQ(a.describe(),
            "mpiasr train on host nodeA, process 4242, started 2026-12-04 23:44:10 +0100");
  EXPECT_FALSE(LockHolder::parse("").has_value());
  EXPECT_FALSE(LockHolder::parse("not a record\n").has_value());
  const LockHolder me = LockHolder::this_process("prepare", "nodeB", "nodeB 7");
  EXPECT_EQ(me.pid, int64_t(getpid()));
  EXPECT_EQ(me.command, "prepare");
  EXPECT_TRUE(std::regex_match(me.started,
                               std::regex("20[0-9]{2}-[01][0-9]-[0-3][0-9] [0-2][0-9]:[0-5][0-9]:"
                                          "[0-6][0-9] [+-][0-9]{4}")))
      << me.started;
}

// flock locks belong to an open file, so a second LockFile of this process
// on the same path is refused as another process would be.
TEST(LockFile, OneHolderAtATimeAndReleasedEmpty) {
  TempDir dir;
  const std::string path = dir.file("mpiasr.lock");
  const LockHolder a = holder("nodeA", 11), b = holder("nodeB", 22);
  {
    const LockFile first(path, a, ExitCode::kUsage);
    ASSERT_EQ(first.state(), LockFile::State::kHeld);
    EXPECT_FALSE(first.stale_holder().has_value());
    EXPECT_EQ(read_file(path), a.record());
    const LockFile second(path, b, ExitCode::kUsage);
    EXPECT_EQ(second.state(), LockFile::State::kInUse);
    expect_same(second.holder(), a);
    EXPECT_EQ(read_file(path), a.record());  // the refused one wrote nothing
  }
  EXPECT_EQ(read_file(path), "");
  const LockFile third(path, b, ExitCode::kUsage);
  EXPECT_EQ(third.state(), LockFile::State::kHeld);
  EXPECT_FALSE(third.stale_holder().has_value());
  EXPECT_EQ(read_file(path), b.record());
}

// A child process takes the lock and is killed with SIGKILL: the kernel
// frees the lock, the record stays, and the next taker names the child.
TEST(LockFile, LockOfAKilledProcessIsTakenOverNamingIt) {
  TempDir dir;
  const std::string path = dir.file("mpiasr.lock");
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const LockFile lock(path, LockHolder::this_process("train", "nodeA", "nodeA 1"),
                        ExitCode::kUsage);
    const char state = lock.state() == LockFile::State::kHeld ? 'H' : 'X';
    if (write(ready[1], &state, 1) != 1) _exit(3);
    while (true) pause();
  }
  close(ready[1]);
  char state = 0;
  ASSERT_EQ(read(ready[0], &state, 1), 1);
  close(ready[0]);
  ASSERT_EQ(state, 'H');
  {
    const LockFile refused(path, holder("nodeB", 22), ExitCode::kUsage);
    EXPECT_EQ(refused.state(), LockFile::State::kInUse);
    ASSERT_TRUE(refused.holder().has_value());
    EXPECT_EQ(refused.holder()->pid, child);
  }
  ASSERT_EQ(kill(child, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;

  const LockHolder b = holder("nodeB", 22);
  const LockFile taken(path, b, ExitCode::kUsage);
  EXPECT_EQ(taken.state(), LockFile::State::kHeld);
  ASSERT_TRUE(taken.stale_holder().has_value());
  EXPECT_EQ(taken.stale_holder()->pid, child);
  EXPECT_EQ(taken.stale_holder()->host, "nodeA");
  EXPECT_EQ(read_file(path), b.record());
}

TEST(LockFile, AFileThatCannotBeMadeSaysWhy) {
  TempDir dir;
  std::ofstream(dir.file("plain")) << "x";
  const auto error = [](const std::string& path) -> std::string {
    try {
      const LockFile lock(path, holder("nodeA", 11), ExitCode::kUsage);
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kUsage);
      return e.what();
    }
    return "";
  };
  EXPECT_EQ(error(dir.file("missing/mpiasr.lock"))
                .rfind("cannot create " + dir.file("missing/mpiasr.lock") + ": file not found", 0),
            0u);
  EXPECT_EQ(error(dir.file("plain/mpiasr.lock"))
                .rfind("cannot create " + dir.file("plain/mpiasr.lock") +
                           ": a part of the path is not a folder",
                       0),
            0u);
}

}  // namespace
}  // namespace mpiasr
