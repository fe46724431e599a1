// Allocation call sites in a run (interpose/allocation_sites.h): one stack, one id, every time;
// another stack, another id; the modules on it are named; and the id is the trace writer's for
// the same frames (the hash is shared: trace_format_test checks it against the writer).
#include "interpose/allocation_sites.h"

#include <algorithm>
#include <string>
#include <vector>

#include "gtest/gtest.h"

namespace spillway::interpose {
namespace {

// Two distinct call sites (not inlined: each keeps its own return address).
[[gnu::noinline]] uint64_t SiteA() {
  const uint64_t site = AllocationCallSite(nullptr);
  asm volatile("" ::: "memory");
  return site;
}
[[gnu::noinline]] uint64_t SiteB() {
  const uint64_t site = AllocationCallSite(nullptr);
  asm volatile("" ::: "memory");
  return site;
}

TEST(AllocationSites, SameStackSameIdOtherStackOtherIdWithItsModules) {
  ASSERT_TRUE(PrepareAllocationSites()) << "libunwind.so.8 is a test dependency (setup.sh)";
  // The whole stack names the site: the same call, made twice from the same place.
  uint64_t ids[2];
  volatile int count = 2;  // a loop the compiler cannot unroll into two call sites
  for (int i = 0; i < count; ++i) ids[i] = SiteA();
  const uint64_t a = ids[0];
  ASSERT_NE(a, 0u);
  EXPECT_EQ(ids[1], a);
  const uint64_t b = SiteB();
  EXPECT_NE(b, 0u);
  EXPECT_NE(b, a);
  // The test binary itself is on the stack (and libc below main).
  const std::vector<std::string> modules = CallSiteModules(a);
  ASSERT_FALSE(modules.empty());
  EXPECT_TRUE(std::any_of(modules.begin(), modules.end(), [](const std::string& path) {
    return path.find("interpose_unit_test") != std::string::npos;
  })) << modules.front();
  EXPECT_TRUE(CallSiteModules(0x1234).empty());
}

}  // namespace
}  // namespace spillway::interpose
