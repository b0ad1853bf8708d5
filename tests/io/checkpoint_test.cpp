// Checkpoint folders: contents and checksums round trip, the atomic write
// leaves no temporary folder, the latest/best pointers, keep-last-K + best
// retention, and the search for the newest intact checkpoint when the newest
// is truncated, bit-flipped, missing state.json, or a crash left a temporary
// folder. Checksums are checked against published values and a bitwise CRC.
#include "io/checkpoint.h"

#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>

#include "io/checksum.h"
#include "src/base/error.h"
#include "src/base/file.h"

namespace mpiasr {
namespace {

namespace fs = std::filesystem;

// A fresh folder under the build tree, removed afterwards.
class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::string(MPIASR_BINARY_DIR) + "/checkpoint_test-" + std::to_string(::getpid()) +
            "-" + ::testing::UnitTest::GetInstance()->current_test_info()->name();
    fs::remove_all(root_);
  }
  void TearDown() override { fs::remove_all(root_); }

  CheckpointFiles contents(int64_t step) {
    CheckpointFiles c;
    c.files["model.safetensors"] = "model bytes of step " + std::to_string(step) +
                                   std::string(1000 + static_cast<size_t>(step), 'm');
    c.files["optimizer.safetensors"] = std::string(3000, static_cast<char>('a' + step % 26));
    c.files["config.yaml"] = "optimizer:\n  lr: 0.001\n";
    c.state = {{"step", step}, {"epoch", 1}, {"rng", {1, 2, 3}}};
    return c;
  }
  void write_steps(int64_t first, int64_t last, int keep_last,
                   std::optional<int64_t> best = std::nullopt) {
    for (int64_t step = first; step <= last; ++step) {
      write_checkpoint(root_, step, contents(step), keep_last, best);
    }
  }
  std::vector<std::string> entries() {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(root_)) {
      names.push_back(entry.path().filename().string());
    }
    std::sort(names.begin(), names.end());
    return names;
  }
  std::string root_;
};

// CRC32 by its definition, bit by bit (reflected polynomial 0xEDB88320).
uint32_t bitwise_crc32(std::string_view bytes) {
  uint32_t crc = 0xFFFFFFFFu;
  for (unsigned char byte : bytes) {
    crc ^= byte;
    for (int bit = 0; bit < 8; ++bit) crc = (crc >> 1) ^ (0xEDB88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

TEST(Checksum, PublishedValues) {
  EXPECT_EQ(crc32_of("123456789"), 0xCBF43926u);  // the CRC-32 check value
  EXPECT_EQ(crc32_of(""), 0u);
  EXPECT_EQ(crc32_hex(0xCBF43926u), "cbf43926");
  EXPECT_EQ(fnv1a64(""), 0xcbf29ce484222325ull);  // FNV-1a 64 reference vectors
  EXPECT_EQ(fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(fnv1a64("foobar"), 0x85944171f73967e8ull);
  EXPECT_EQ(hash_hex(0xaf63dc4c8601ec8cull), "af63dc4c8601ec8c");
  std::string text;
  for (int i = 0; i < 5000; ++i) text.push_back(static_cast<char>(i * 7919 % 251));
  EXPECT_EQ(crc32_of(text), bitwise_crc32(text));
}

TEST_F(CheckpointTest, WriteReadRoundTripWithChecksums) {
  std::string dir = write_checkpoint(root_, 3, contents(3), 2, std::nullopt);
  EXPECT_EQ(dir, root_ + "/step-00000003");
  EXPECT_EQ(checkpoint_dir(root_, 3), dir);

  CheckpointFiles back = read_checkpoint(root_, 3);
  EXPECT_EQ(back.files, contents(3).files);
  EXPECT_EQ(back.state, contents(3).state);

  // state.json lists every other file with its size and an independent CRC32.
  nlohmann::json state = nlohmann::json::parse(read_file(dir + "/state.json"));
  ASSERT_EQ(state["files"].size(), 3u);
  for (const auto& [name, bytes] : contents(3).files) {
    EXPECT_EQ(state["files"][name]["size"], bytes.size()) << name;
    char hex[9];
    std::snprintf(hex, sizeof hex, "%08x", bitwise_crc32(bytes));
    EXPECT_EQ(state["files"][name]["crc32"], hex) << name;
    EXPECT_EQ(read_file(dir + "/" + name), bytes) << name;
  }
  EXPECT_EQ(state["epoch"], 1);
}

TEST_F(CheckpointTest, AtomicWriteLeavesNoTemporaryFilesAndPointsLatest) {
  write_steps(1, 2, 5);
  EXPECT_EQ(entries(), (std::vector<std::string>{"latest", "step-00000001", "step-00000002"}));
  EXPECT_EQ(read_file(root_ + "/latest"), "step-00000002\n");
  EXPECT_EQ(read_checkpoint_pointer(root_, "latest"), 2);
  EXPECT_EQ(read_checkpoint_pointer(root_, "best"), std::nullopt);
}

TEST_F(CheckpointTest, CreatesANestedRootGivenWithATrailingSlash) {
  write_checkpoint(root_ + "/runs/a/", 7, contents(7), 1, std::nullopt);
  EXPECT_EQ(find_latest_intact(root_ + "/runs/a", [](const std::string&) {}), 7);
  EXPECT_EQ(read_checkpoint(root_ + "/runs/a", 7).files, contents(7).files);
}

TEST_F(CheckpointTest, KeepsLastKPlusBest) {
  write_steps(1, 1, 2);
  write_steps(2, 2, 2, /*best=*/2);
  write_steps(3, 6, 2);  // the best pointer stands
  EXPECT_EQ(entries(), (std::vector<std::string>{"best", "latest", "step-00000002", "step-00000005",
                                                 "step-00000006"}));
  EXPECT_EQ(read_file(root_ + "/best"), "step-00000002\n");

  write_steps(7, 7, 2, /*best=*/6);  // a new best: step 2 goes
  EXPECT_EQ(entries(),
            (std::vector<std::string>{"best", "latest", "step-00000006", "step-00000007"}));
  EXPECT_EQ(read_checkpoint_pointer(root_, "best"), 6);
  EXPECT_EQ(read_checkpoint_pointer(root_, "latest"), 7);
  write_steps(8, 9, 1);
  EXPECT_EQ(entries(),
            (std::vector<std::string>{"best", "latest", "step-00000006", "step-00000009"}));
}

TEST_F(CheckpointTest, RewritingAStepReplacesItAndNewerStepsOfAnAbandonedRunGo) {
  write_steps(1, 4, 10);
  CheckpointFiles again = contents(2);
  again.files["model.safetensors"] = "retrained";
  write_checkpoint(root_, 2, again, 10, std::nullopt);
  EXPECT_EQ(entries(), (std::vector<std::string>{"latest", "step-00000001", "step-00000002"}));
  EXPECT_EQ(read_checkpoint(root_, 2).files["model.safetensors"], "retrained");
  EXPECT_EQ(read_checkpoint_pointer(root_, "latest"), 2);
}

TEST_F(CheckpointTest, FlippedByteInNewestFallsBackToPrevious) {
  write_steps(1, 3, 5);
  std::string model = checkpoint_dir(root_, 3) + "/model.safetensors";
  {
    std::fstream file(model, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(100);
    file.put('#');
  }
  std::vector<std::string> log;
  auto record = [&](const std::string& line) { log.push_back(line); };
  EXPECT_EQ(find_latest_intact(root_, record), 2);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("step-00000003"), std::string::npos) << log[0];
  EXPECT_NE(log[0].find("model.safetensors has CRC32"), std::string::npos) << log[0];

  try {
    read_checkpoint(root_, 3);
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kCheckpoint);
    EXPECT_NE(std::string(e.what()).find("corrupt"), std::string::npos) << e.what();
  }
  log.clear();
  EXPECT_EQ(list_intact_steps(root_, record), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(log.size(), 1u);
}

TEST_F(CheckpointTest, TruncatedFileInNewestFallsBackToPrevious) {
  write_steps(1, 3, 5);
  fs::resize_file(checkpoint_dir(root_, 3) + "/optimizer.safetensors", 1000);
  std::vector<std::string> log;
  EXPECT_EQ(find_latest_intact(root_, [&](const std::string& line) { log.push_back(line); }), 2);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_NE(log[0].find("optimizer.safetensors is 1000 bytes, state.json says 3000 (truncated?)"),
            std::string::npos)
      << log[0];
}

TEST_F(CheckpointTest, MissingOrBrokenStateJsonFallsBack) {
  write_steps(1, 4, 5);
  fs::remove(checkpoint_dir(root_, 4) + "/state.json");
  { std::ofstream(checkpoint_dir(root_, 3) + "/state.json") << "{\"files\": {"; }
  fs::remove(checkpoint_dir(root_, 2) + "/config.yaml");
  std::vector<std::string> log;
  EXPECT_EQ(find_latest_intact(root_, [&](const std::string& line) { log.push_back(line); }), 1);
  ASSERT_EQ(log.size(), 3u);
  EXPECT_NE(log[0].find("step-00000004 is not intact: state.json is missing"), std::string::npos)
      << log[0];
  EXPECT_NE(log[1].find("step-00000003 is not intact: state.json is not valid JSON ("),
            std::string::npos)
      << log[1];
  EXPECT_NE(log[1].find("parse error at line 1, column 12"), std::string::npos) << log[1];
  EXPECT_NE(log[2].find("step-00000002 is not intact: config.yaml is missing"), std::string::npos)
      << log[2];
}

TEST_F(CheckpointTest, LeftoverTemporaryFolderIsIgnoredThenCleaned) {
  write_steps(1, 1, 5);
  // A crash while writing step 2: a complete-looking folder that was never renamed.
  std::string crashed = root_ + "/.tmp-step-00000002-99999";
  fs::create_directories(crashed);
  { std::ofstream(crashed + "/state.json") << R"({"files": {}})"; }
  std::vector<std::string> log;
  EXPECT_EQ(find_latest_intact(root_, [&](const std::string& line) { log.push_back(line); }), 1);
  EXPECT_TRUE(log.empty());
  EXPECT_EQ(list_intact_steps(root_, [](const std::string&) {}), std::vector<int64_t>{1});

  write_steps(2, 2, 5);
  EXPECT_FALSE(fs::exists(crashed));
  EXPECT_EQ(entries(), (std::vector<std::string>{"latest", "step-00000001", "step-00000002"}));
}

// A write that fails part way (here files are limited to 2000 bytes, so the
// 3000 of optimizer.safetensors fail as on a full disk) removes its
// temporary folder: it used to stay, holding the partial model, until a
// later write, which a still-full disk may never reach.
TEST_F(CheckpointTest, FailedWriteRemovesItsTemporaryFolder) {
  write_steps(1, 1, 5);
  struct FileSizeLimit {
    explicit FileSizeLimit(rlim_t bytes) {
      getrlimit(RLIMIT_FSIZE, &old);
      rlimit small = old;
      small.rlim_cur = bytes;
      setrlimit(RLIMIT_FSIZE, &small);
      old_handler = std::signal(SIGXFSZ, SIG_IGN);  // write() then fails with EFBIG
    }
    ~FileSizeLimit() {
      setrlimit(RLIMIT_FSIZE, &old);
      std::signal(SIGXFSZ, old_handler);
    }
    rlimit old{};
    void (*old_handler)(int) = nullptr;
  };
  try {
    const FileSizeLimit limit(2000);
    write_checkpoint(root_, 2, contents(2), 5, std::nullopt);
    ADD_FAILURE() << "a write past the file size limit succeeded";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kCheckpoint);
    EXPECT_NE(std::string(e.what()).find("/optimizer.safetensors: "), std::string::npos)
        << e.what();
  }
  EXPECT_EQ(entries(), (std::vector<std::string>{"latest", "step-00000001"}));
  EXPECT_EQ(find_latest_intact(root_, [](const std::string&) {}), 1);
  write_steps(2, 2, 5);  // and the next write goes through
  EXPECT_EQ(entries(), (std::vector<std::string>{"latest", "step-00000001", "step-00000002"}));
}

TEST_F(CheckpointTest, EmptyOrAbsentRootHasNoCheckpoint) {
  auto ignore = [](const std::string&) {};
  EXPECT_EQ(find_latest_intact(root_, ignore), std::nullopt);
  fs::create_directories(root_ + "/step-junk");
  EXPECT_EQ(find_latest_intact(root_, ignore), std::nullopt);
  EXPECT_TRUE(list_intact_steps(root_, ignore).empty());
  EXPECT_THROW(read_checkpoint(root_, 1), Error);
}

TEST_F(CheckpointTest, RejectsBadArguments) {
  CheckpointFiles with_state_file = contents(1);
  with_state_file.files["state.json"] = "{}";
  EXPECT_THROW(write_checkpoint(root_, 1, with_state_file, 2, std::nullopt), Error);
  CheckpointFiles with_path = contents(1);
  with_path.files["../escape"] = "x";
  EXPECT_THROW(write_checkpoint(root_, 1, with_path, 2, std::nullopt), Error);
  EXPECT_THROW(write_checkpoint(root_, 1, contents(1), 0, std::nullopt), Error);
  EXPECT_THROW(write_checkpoint(root_, 5, contents(5), 2, /*best=*/3), Error);  // no step 3
  fs::create_directories(root_);
  { std::ofstream(root_ + "/best") << "garbage\n"; }
  try {
    read_checkpoint_pointer(root_, "best");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("found 'garbage'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace mpiasr
