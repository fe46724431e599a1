// InnerPages: the whole pages of a byte range, which is all a discard may name.
#include "interpose/page_range.h"

#include "gtest/gtest.h"

namespace spillway::interpose {
namespace {

constexpr uint64_t kPage = 4096;

TEST(InnerPagesTest, AnAlignedRangeIsItself) {
  const PageRange r = InnerPages(16 * kPage, 4 * kPage, kPage);
  EXPECT_EQ(r.begin, 16 * kPage);
  EXPECT_EQ(r.end, 20 * kPage);
}

TEST(InnerPagesTest, PartialPagesAtBothEndsAreLeftOut) {
  // A pool allocation at 512 B into a page, ending 100 B into another.
  const PageRange r = InnerPages(16 * kPage + 512, 3 * kPage - 412, kPage);
  EXPECT_EQ(r.begin, 17 * kPage);
  EXPECT_EQ(r.end, 19 * kPage);
  EXPECT_EQ(r.bytes(), 2 * kPage);
}

TEST(InnerPagesTest, ARangeInsideOnePageHasNone) {
  EXPECT_EQ(InnerPages(16 * kPage + 512, 1000, kPage).bytes(), 0u);
  EXPECT_EQ(InnerPages(16 * kPage + 512, kPage, kPage).bytes(), 0u);  // spans two, covers neither
  EXPECT_EQ(InnerPages(16 * kPage, 0, kPage).bytes(), 0u);
}

TEST(InnerPagesTest, ARangeAtTheTopOfTheAddressSpaceDoesNotWrap) {
  EXPECT_EQ(InnerPages(~uint64_t{0} - 100, 50, kPage).bytes(), 0u);
}

}  // namespace
}  // namespace spillway::interpose
