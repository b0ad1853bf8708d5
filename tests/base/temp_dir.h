// TempDir: a fresh folder under the system's temporary folder for one test,
// named mpiasr_test_PID_N, removed with everything in it when the TempDir
// goes (its own permissions given back first, for tests that take them away).
#pragma once

#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace mpiasr {

class TempDir {
 public:
  TempDir() {
    static int count = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("mpiasr_test_" + std::to_string(getpid()) + "_" + std::to_string(count++));
    std::filesystem::create_directories(path_);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::permissions(path_, std::filesystem::perms::owner_all,
                                 std::filesystem::perm_options::add, ignored);
    std::filesystem::remove_all(path_, ignored);
  }

  std::string file(const std::string& name) const { return (path_ / name).string(); }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

}  // namespace mpiasr
