// Tests of the launcher's size options check (launcher/size_check.h).
#include "launcher/size_check.h"

#include <gtest/gtest.h>

namespace spillway::launcher {
namespace {

TEST(CheckSizeTest, AcceptsSizesAndEmpty) {
  EXPECT_FALSE(CheckSize("run", "--device-memory", "8GiB", 4096));
  EXPECT_FALSE(CheckSize("run", "--device-memory", "4096", 4096));
  EXPECT_FALSE(CheckSize("run", "--device-memory", "", 4096));
  EXPECT_FALSE(CheckSize("run", "--host-memory", "0", 0));
}

TEST(CheckSizeTest, NamesOptionAndValue) {
  const auto error = CheckSize("run", "--device-memory", "3GX", 4096);
  ASSERT_TRUE(error);
  EXPECT_EQ(error->rfind("run: bad --device-memory '3GX': ", 0), 0u) << *error;
  const auto profile = CheckSize("profile", "--host-memory", "lots", 0);
  ASSERT_TRUE(profile);
  EXPECT_EQ(profile->rfind("profile: bad --host-memory 'lots': ", 0), 0u) << *profile;
}

TEST(CheckSizeTest, LessThanAPage) {
  EXPECT_EQ(CheckSize("run", "--device-memory", "4095", 4096),
            "run: bad --device-memory '4095': 4095 B, less than one 4 KiB page");
  EXPECT_TRUE(CheckSize("run", "--device-memory", "0", 4096));
  EXPECT_TRUE(CheckSize("run", "--device-memory", "99999999TiB", 4096));
}

}  // namespace
}  // namespace spillway::launcher
