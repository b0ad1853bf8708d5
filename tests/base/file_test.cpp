// The file helpers' error reports: every kind of filesystem failure the
// program meets on a user's path gets its own words and the caller's exit
// code (a symlink loop is not "file not found", a permission problem not a
// corrupt file), and make_folders says why a folder cannot be made.
#include "src/base/file.h"
#include "tests/base/temp_dir.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

namespace mpiasr {
namespace {

namespace fs = std::filesystem;

// The message and code of the Error that f throws, or "" when it throws none.
template <typename F>
std::string error_of(F&& f, ExitCode expected_code) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), expected_code) << e.what();
    return e.what();
  }
  return "";
}

#define EXPECT_STARTS_WITH(text, prefix) \
  EXPECT_EQ(std::string(text).substr(0, std::string(prefix).size()), prefix) << (text)

TEST(RequireReadableFile, NamesWhatIsWrong) {
  TempDir dir;
  std::ofstream(dir.file("ok.wav")) << "x";
  fs::create_symlink(dir.file("loop_b"), dir.file("loop_a"));
  fs::create_symlink(dir.file("loop_a"), dir.file("loop_b"));
  fs::create_directories(dir.file("folder.wav"));
  ASSERT_EQ(mkfifo(dir.file("pipe.wav").c_str(), 0600), 0);
  fs::create_symlink(dir.file("gone.wav"), dir.file("dangling.wav"));

  auto check = [&](const std::string& name) {
    return error_of(
        [&] { require_readable_file(dir.file(name), "audio file", ExitCode::kBadInput); },
        ExitCode::kBadInput);
  };
  EXPECT_EQ(check("ok.wav"), "");
  const std::string prefix = "audio file '" + dir.file("");
  EXPECT_STARTS_WITH(check("missing.wav"), prefix + "missing.wav': file not found");
  EXPECT_STARTS_WITH(check("dangling.wav"), prefix + "dangling.wav': file not found");
  EXPECT_STARTS_WITH(check("loop_a"),
                     prefix + "loop_a': a symbolic link loop (too many levels of symbolic links)");
  EXPECT_STARTS_WITH(check("folder.wav"), prefix + "folder.wav': is a folder, not a file");
  EXPECT_STARTS_WITH(check("pipe.wav"),
                     prefix + "pipe.wav': not a regular file (a device, pipe or socket)");
  EXPECT_STARTS_WITH(check("ok.wav/x"), prefix + "ok.wav/x': a part of the path is not a folder");
}

// Permission: root reads anything, so as root the check runs in a child
// process that has given up root (user nobody).
TEST(RequireReadableFile, PermissionDenied) {
  TempDir dir;
  std::ofstream(dir.file("locked.wav")) << "x";
  fs::permissions(dir.file("locked.wav"), fs::perms::none);
  fs::permissions(dir.file(""), fs::perms::all, fs::perm_options::add);
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    if (getuid() == 0 && (setgid(65534) != 0 || setuid(65534) != 0)) _exit(2);
    std::string what;
    try {
      require_readable_file(dir.file("locked.wav"), "audio file", ExitCode::kBadInput);
    } catch (const Error& e) {
      what = e.what();
    }
    const ssize_t wrote = write(pipe_fds[1], what.data(), what.size());
    _exit(wrote == ssize_t(what.size()) ? 0 : 3);
  }
  close(pipe_fds[1]);
  std::string what;
  char buffer[512];
  for (ssize_t got; (got = read(pipe_fds[0], buffer, sizeof buffer)) > 0;)
    what.append(buffer, size_t(got));
  close(pipe_fds[0]);
  int status = 0;
  waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_STARTS_WITH(what, "audio file '" + dir.file("locked.wav") + "': permission denied");
}

TEST(MakeFolders, MakesParentsOrSaysWhyNot) {
  TempDir dir;
  make_folders(dir.file("a/b/c"), "output.dir", ExitCode::kUsage);
  EXPECT_TRUE(fs::is_directory(dir.file("a/b/c")));
  make_folders(dir.file("a/b/c"), "output.dir", ExitCode::kUsage);  // exists: fine
  std::ofstream(dir.file("plain")) << "x";
  EXPECT_STARTS_WITH(
      error_of([&] { make_folders(dir.file("plain/run"), "output.dir", ExitCode::kUsage); },
               ExitCode::kUsage),
      "output.dir '" + dir.file("plain/run") +
          "': cannot create the folder: a part of the path is not a folder");
}

TEST(ReadFile, AFolderIsNotAFile) {
  TempDir dir;
  EXPECT_STARTS_WITH(error_of([&] { read_file(dir.file(""), ExitCode::kUsage); }, ExitCode::kUsage),
                     "cannot read " + dir.file("") + ": is a folder, not a file");
}

// write_file: the file's bytes, or why not; a device takes them as a file
// does (no fsync, which a device or a pipe refuses).
TEST(WriteFile, WritesOrSaysWhyNot) {
  TempDir dir;
  write_file(dir.file("hyps.tsv"), "a\tb\n", ExitCode::kUsage);
  write_file(dir.file("hyps.tsv"), "c\n", ExitCode::kUsage);  // replaces
  EXPECT_EQ(read_file(dir.file("hyps.tsv")), "c\n");
  write_file("/dev/null", "c\n", ExitCode::kUsage);
  std::ofstream(dir.file("plain")) << "x";
  const auto error = [](const std::string& path) {
    return error_of([&] { write_file(path, "c\n", ExitCode::kUsage); }, ExitCode::kUsage);
  };
  EXPECT_STARTS_WITH(error("/dev/full"), "cannot write /dev/full: no space left on the device");
  EXPECT_STARTS_WITH(
      error(dir.file("plain/hyps.tsv")),
      "cannot create " + dir.file("plain/hyps.tsv") + ": a part of the path is not a folder");
  EXPECT_STARTS_WITH(error(dir.file("missing/hyps.tsv")),
                     "cannot create " + dir.file("missing/hyps.tsv") + ": file not found");
  EXPECT_STARTS_WITH(error(dir.file("")), "cannot create " + dir.file("") + ": is a folder");
}

// A file is replaced whole by a rename; a device, or a link to one, is
// written through and stays what it was (as root a rename would replace
// /dev/stdout itself).
TEST(WriteFileAtomic, ReplacesFilesAndWritesThroughDevices) {
  TempDir dir;
  const std::string path = dir.file("lm.arpa");
  write_file_atomic(path, "old\n", ExitCode::kUsage);
  write_file_atomic(path, "new\n", ExitCode::kUsage);
  EXPECT_EQ(read_file(path), "new\n");
  const std::string link = dir.file("out");
  std::filesystem::create_symlink("/dev/null", link);
  write_file_atomic(link, "arpa\n", ExitCode::kUsage);
  EXPECT_TRUE(std::filesystem::is_symlink(link));
  EXPECT_EQ(std::filesystem::read_symlink(link), "/dev/null");
  EXPECT_FALSE(std::filesystem::exists(link + ".tmp"));
  EXPECT_STARTS_WITH(
      error_of([&] { write_file_atomic("/dev/full", "x\n", ExitCode::kUsage); }, ExitCode::kUsage),
      "cannot write /dev/full: no space left on the device");
}

// open_file with O_APPEND and write_all: each write lands after the last.
TEST(WriteAll, AppendsToAnOpenFile) {
  TempDir dir;
  const std::string path = dir.file("metrics.jsonl");
  write_file(path, "1\n", ExitCode::kUsage);
  {
    const FileDescriptor file = open_file(path, O_WRONLY | O_APPEND, ExitCode::kUsage);
    write_all(file, "2\n", path, ExitCode::kUsage);
    write_all(file, "3\n", path, ExitCode::kUsage);
  }
  EXPECT_EQ(read_file(path), "1\n2\n3\n");
  const FileDescriptor full = open_file("/dev/full", O_WRONLY | O_APPEND, ExitCode::kUsage);
  EXPECT_STARTS_WITH(
      error_of([&] { write_all(full, "4\n", "/dev/full", ExitCode::kUsage); }, ExitCode::kUsage),
      "cannot write /dev/full: no space left on the device");
  EXPECT_STARTS_WITH(
      error_of([&] { open_file(dir.file("absent"), O_WRONLY | O_APPEND, ExitCode::kUsage); },
               ExitCode::kUsage),
      "cannot open " + dir.file("absent") + ": file not found");
}

TEST(FileErrorText, FallsBackToStrerror) {
  EXPECT_EQ(file_error_text(EACCES), "permission denied");
  EXPECT_EQ(file_error_text(ENOSPC), "no space left on the device");
  EXPECT_EQ(file_error_text(EBADF), std::string(std::strerror(EBADF)));
}

}  // namespace
}  // namespace mpiasr
