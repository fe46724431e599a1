// Tests of the environ-scanning lookups.
#include "common/env.h"

#include <cstdlib>

#include "gtest/gtest.h"

namespace spillway {
namespace {

TEST(GetEnv, FindsExactNamesOnly) {
  ::setenv("SPILLWAY_TEST_VAR", "abc", 1);
  ::setenv("SPILLWAY_TEST_VARX", "zzz", 1);
  EXPECT_EQ(GetEnv("SPILLWAY_TEST_VAR"), "abc");
  EXPECT_EQ(GetEnv("SPILLWAY_TEST_VA"), std::nullopt);
  ::unsetenv("SPILLWAY_TEST_VAR");
  EXPECT_EQ(GetEnv("SPILLWAY_TEST_VAR"), std::nullopt);
}

TEST(EnvFlag, ReadsCommonSpellings) {
  ::setenv("SPILLWAY_TEST_FLAG", "1", 1);
  EXPECT_TRUE(EnvFlag("SPILLWAY_TEST_FLAG"));
  ::setenv("SPILLWAY_TEST_FLAG", "off", 1);
  EXPECT_FALSE(EnvFlag("SPILLWAY_TEST_FLAG"));
  ::unsetenv("SPILLWAY_TEST_FLAG");
  EXPECT_FALSE(EnvFlag("SPILLWAY_TEST_FLAG"));
}

}  // namespace
}  // namespace spillway
