// The device arena's size from the free memory and the reserve
// (DeviceArena::capacity_for), which needs no GPU: the reserve stays free,
// and a reserve that leaves nothing is a usage error naming the config key.
#include "kernels/cuda/device_arena.h"

#include <gtest/gtest.h>

#include <string>

#include "src/base/error.h"

namespace mpiasr {
namespace {

constexpr size_t kMiB = size_t(1) << 20, kGiB = size_t(1) << 30;

TEST(DeviceArena, TakesTheFreeMemoryLessTheReserve) {
  EXPECT_EQ(DeviceArena::capacity_for(139 * kGiB, 3 * kGiB), 136 * kGiB);
  EXPECT_EQ(DeviceArena::capacity_for(10 * kGiB, 0), 10 * kGiB);
  EXPECT_EQ(DeviceArena::capacity_for(4 * kGiB + 1, 4 * kGiB), 1u);
  // training.gpu_reserve_mb = 1536.5 as the trainer converts it.
  EXPECT_EQ(DeviceArena::capacity_for(8 * kGiB, size_t(1536.5 * kMiB)),
            8 * kGiB - 1536 * kMiB - kMiB / 2);
}

TEST(DeviceArena, AReserveThatLeavesNothingIsAUsageError) {
  for (size_t free_bytes : {3 * kGiB, 2 * kGiB, size_t(0)}) {
    try {
      DeviceArena::capacity_for(free_bytes, 3 * kGiB);
      FAIL() << free_bytes;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), ExitCode::kUsage);
      const std::string what = e.what();
      EXPECT_NE(what.find("3072 MiB are to stay free"), std::string::npos) << what;
      EXPECT_NE(what.find("training.gpu_reserve_mb"), std::string::npos) << what;
    }
  }
}

}  // namespace
}  // namespace mpiasr
