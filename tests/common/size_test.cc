// Tests of ParseSize and FormatSize: units, decimals, and the errors people see.
#include "common/size.h"

#include "gtest/gtest.h"

namespace spillway {
namespace {

TEST(ParseSize, AcceptsBinaryAndDecimalUnits) {
  EXPECT_EQ(*ParseSize("4096"), 4096u);
  EXPECT_EQ(*ParseSize("2GiB"), 2ull << 30);
  EXPECT_EQ(*ParseSize("2G"), 2ull << 30);
  EXPECT_EQ(*ParseSize("512mib"), 512ull << 20);
  EXPECT_EQ(*ParseSize("3 MB"), 3000000u);
  EXPECT_EQ(*ParseSize("1.5GiB"), 3ull << 29);
  EXPECT_EQ(*ParseSize(" 7k "), 7168u);
  // FormatSize writes PiB for the largest sizes; ParseSize must read back what it writes.
  EXPECT_EQ(*ParseSize("2PiB"), 2ull << 50);
}

TEST(ParseSize, RejectsWhatIsNotASize) {
  const auto unit = ParseSize("3GX");
  ASSERT_FALSE(unit.ok());
  EXPECT_NE(unit.status().message().find("unknown unit 'GX'"), absl::string_view::npos);
  EXPECT_FALSE(ParseSize("").ok());
  EXPECT_FALSE(ParseSize("GiB").ok());
  EXPECT_FALSE(ParseSize("-1").ok());
  EXPECT_FALSE(ParseSize("99999999999TiB").ok());
}

TEST(ParseSize, SizesFrom8EiBUpTo16EiBAreExact) {
  EXPECT_EQ(*ParseSize("10000PiB"), 10000ull << 50);
  EXPECT_EQ(*ParseSize("15000PB"), 15000ull * 1000 * 1000 * 1000 * 1000 * 1000);
  EXPECT_FALSE(ParseSize("16384PiB").ok());  // 2^64
}

TEST(FormatSize, PicksABinaryUnit) {
  EXPECT_EQ(FormatSize(512), "512 B");
  EXPECT_EQ(FormatSize(3ull << 29), "1.50 GiB");
}

}  // namespace
}  // namespace spillway
