// ResidencyEngine with the lru policy over the fake device: eviction order, the current access
// set is never evicted, the budget holds, counters and discard on free.
#include "policy/residency_engine.h"

#include "gtest/gtest.h"
#include "tests/policy/fake_device.h"

namespace spillway::policy {
namespace {

using testing::DeviceCall;
using testing::FakeDevice;

constexpr uint64_t kMiB = 1ull << 20;
Stream const kStream = reinterpret_cast<Stream>(0x5);

class ResidencyEngineTest : public ::testing::Test {
 protected:
  explicit ResidencyEngineTest(uint64_t budget = 8 * kMiB)
      : engine_(&device_, MakeLruPolicy(), budget) {}

  Allocation Managed(uint64_t bytes) {
    uint64_t address = 0;
    device_.AllocateManaged(&address, bytes);
    const Allocation allocation =
        registry_.Insert(address, bytes, Backing::kManaged, false, true);
    engine_.OnAllocated(allocation);
    return allocation;
  }
  int Launch(std::initializer_list<Allocation> access) {
    return engine_.OnLaunch(AccessSet(access), kStream);
  }
  std::vector<uint64_t> Addresses(const std::string& what) const {
    std::vector<uint64_t> out;
    for (const DeviceCall& call : device_.Calls(what)) out.push_back(call.address);
    return out;
  }

  FakeDevice device_;
  AllocationRegistry registry_;
  ResidencyEngine engine_;
};

TEST_F(ResidencyEngineTest, PrefetchesTheAccessSetOnTheLaunchStream) {
  const Allocation a = Managed(2 * kMiB), b = Managed(2 * kMiB);
  EXPECT_EQ(Launch({a, b}), 0);
  EXPECT_EQ(Addresses("to_device"), (std::vector<uint64_t>{a.base, b.base}));
  for (const DeviceCall& call : device_.Calls("to_device")) EXPECT_EQ(call.stream, kStream);
  // Already resident: no second prefetch.
  EXPECT_EQ(Launch({a}), 0);
  EXPECT_EQ(device_.Calls("to_device").size(), 2u);
  EXPECT_TRUE(device_.Calls("to_host").empty());
  EXPECT_EQ(engine_.prefetch_bytes(), 4 * kMiB);
  EXPECT_EQ(engine_.evict_bytes(), 0u);
  EXPECT_EQ(engine_.policy_name(), "lru");
}

TEST_F(ResidencyEngineTest, EvictsLeastRecentlyUsedFirst) {
  const Allocation a = Managed(2 * kMiB), b = Managed(2 * kMiB), c = Managed(2 * kMiB),
                   d = Managed(2 * kMiB), e = Managed(2 * kMiB), f = Managed(2 * kMiB);
  Launch({a});
  Launch({b});
  Launch({c});
  Launch({d});  // budget full: a b c d
  Launch({a});  // a is now the newest; b is the oldest
  Launch({e});  // evicts b
  Launch({f});  // evicts c
  EXPECT_EQ(Addresses("to_host"), (std::vector<uint64_t>{b.base, c.base}));
  for (const DeviceCall& call : device_.Calls("to_host")) EXPECT_EQ(call.stream, kStream);
  EXPECT_EQ(engine_.evict_bytes(), 4 * kMiB);
  EXPECT_EQ(engine_.resident_estimate(), 8 * kMiB);
}

TEST_F(ResidencyEngineTest, NeverEvictsTheCurrentAccessSet) {
  const Allocation a = Managed(3 * kMiB), b = Managed(3 * kMiB), c = Managed(3 * kMiB);
  Launch({a, b});
  Launch({b, c});  // needs c; a is the only candidate although b is older than... b is in the set
  EXPECT_EQ(Addresses("to_host"), (std::vector<uint64_t>{a.base}));
  Launch({a, b, c});  // 9 MiB > 8 MiB: nothing may go, a is left to demand paging
  EXPECT_EQ(Addresses("to_host"), (std::vector<uint64_t>{a.base}));
  EXPECT_EQ(Addresses("to_device"), (std::vector<uint64_t>{a.base, b.base, c.base}));
  EXPECT_LE(engine_.resident_estimate(), engine_.budget_bytes());
}

TEST_F(ResidencyEngineTest, BudgetHoldsOverManyLaunches) {
  std::vector<Allocation> all;
  for (int i = 0; i < 12; ++i) all.push_back(Managed(kMiB + 4096 * i));
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < all.size(); ++i) {
      Launch({all[i], all[(i + 1) % all.size()]});
      EXPECT_LE(engine_.resident_estimate(), engine_.budget_bytes());
    }
  }
  EXPECT_EQ(engine_.prefetch_bytes() - engine_.evict_bytes(), engine_.resident_estimate());
}

TEST_F(ResidencyEngineTest, DeviceAllocationsTakeAFixedShareOfTheBudget) {
  const Allocation fixed = registry_.Insert(0x1000, 6 * kMiB, Backing::kDevice, true, false);
  engine_.OnAllocated(fixed);
  const Allocation a = Managed(2 * kMiB), b = Managed(2 * kMiB);
  Launch({a, fixed});
  Launch({b});
  EXPECT_EQ(Addresses("to_host"), (std::vector<uint64_t>{a.base}));
  EXPECT_EQ(engine_.OnFree(fixed, nullptr), 0);
  EXPECT_TRUE(device_.Calls("discard").empty());  // only managed memory is discarded
  EXPECT_EQ(engine_.resident_estimate(), 2 * kMiB);
}

TEST_F(ResidencyEngineTest, FreeDiscardsAndForgets) {
  const Allocation a = Managed(2 * kMiB), b = Managed(2 * kMiB);
  Launch({a, b});
  EXPECT_EQ(engine_.OnFree(a, kStream), 0);
  EXPECT_EQ(Addresses("discard"), (std::vector<uint64_t>{a.base}));
  EXPECT_EQ(engine_.discard_bytes(), 2 * kMiB);
  EXPECT_EQ(engine_.resident_estimate(), 2 * kMiB);
  // A freed allocation is never a victim.
  const Allocation c = Managed(4 * kMiB), d = Managed(4 * kMiB);
  Launch({c});
  Launch({d});
  EXPECT_EQ(Addresses("to_host"), (std::vector<uint64_t>{b.base}));
  device_.fail_discard = true;
  EXPECT_EQ(engine_.OnFree(b, nullptr), 1);
  EXPECT_EQ(engine_.discard_bytes(), 2 * kMiB);
}

}  // namespace
}  // namespace spillway::policy
