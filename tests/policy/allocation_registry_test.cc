// AllocationRegistry: containment, interior pointers, replacement, byte counts and a
// concurrency smoke test.
#include "policy/engine/allocation_registry.h"

#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace spillway::policy {
namespace {

TEST(AllocationRegistry, FindsTheAllocationContainingAnAddress) {
  AllocationRegistry registry;
  const Allocation a = registry.Insert(0x1000, 0x100, Backing::kManaged, false, true);
  const Allocation b = registry.Insert(0x2000, 0x1000, Backing::kDevice, true, false);
  EXPECT_EQ(a.id, 1u);
  EXPECT_EQ(b.id, 2u);
  ASSERT_TRUE(registry.Find(0x1000).has_value());
  EXPECT_EQ(registry.Find(0x1000)->id, a.id);
  EXPECT_EQ(registry.Find(0x10ff)->id, a.id);       // interior, last byte
  EXPECT_FALSE(registry.Find(0x1100).has_value());  // one past the end
  EXPECT_FALSE(registry.Find(0xfff).has_value());
  EXPECT_EQ(registry.Find(0x2abc)->id, b.id);
  EXPECT_TRUE(registry.Find(0x2abc)->stream_ordered);
  EXPECT_FALSE(registry.Find(0x3000).has_value());
}

TEST(AllocationRegistry, CountsLiveAndPeakBytes) {
  AllocationRegistry registry;
  registry.Insert(0x1000, 100, Backing::kManaged, false, true);
  registry.Insert(0x2000, 50, Backing::kDevice, false, false);
  EXPECT_EQ(registry.live_bytes(), 150u);
  EXPECT_EQ(registry.managed_bytes(), 100u);
  ASSERT_TRUE(registry.Erase(0x1000).has_value());
  EXPECT_FALSE(registry.Erase(0x1000).has_value());
  EXPECT_FALSE(registry.Find(0x1000).has_value());
  EXPECT_EQ(registry.live_bytes(), 50u);
  EXPECT_EQ(registry.managed_bytes(), 0u);
  EXPECT_EQ(registry.bytes_peak(), 150u);
  EXPECT_EQ(registry.managed_bytes_peak(), 100u);
  EXPECT_EQ(registry.count(), 2u);
}

TEST(AllocationRegistry, CountsLiveBytesPerDevice) {
  AllocationRegistry registry;
  registry.Insert(0x1000, 100, Backing::kManaged, false, false, /*device=*/0);
  registry.Insert(0x9000, 30, Backing::kDevice, false, false, /*device=*/1);
  registry.Insert(0xa000, 20, Backing::kManaged, false, false, /*device=*/1);
  EXPECT_EQ(registry.live_bytes(0), 100u);
  EXPECT_EQ(registry.live_bytes(1), 50u);
  EXPECT_EQ(registry.live_bytes(2), 0u);
  EXPECT_EQ(registry.live_bytes(-1), 0u);
  registry.Erase(0x9000);
  EXPECT_EQ(registry.live_bytes(1), 20u);
  EXPECT_EQ(registry.live_bytes(), 120u);
}

TEST(AllocationRegistry, ReplacesAnAllocationAtTheSameBase) {
  AllocationRegistry registry;
  registry.Insert(0x1000, 100, Backing::kManaged, false, true);
  const Allocation again = registry.Insert(0x1000, 40, Backing::kDevice, false, false);
  EXPECT_EQ(registry.live_bytes(), 40u);
  EXPECT_EQ(registry.managed_bytes(), 0u);
  EXPECT_EQ(registry.Find(0x1010)->id, again.id);
  EXPECT_FALSE(registry.Find(0x1040).has_value());
}

// What a context's end freed leaves only if no newer allocation took its base meanwhile.
TEST(AllocationRegistry, ErasesAnAllocationOnlyWhileItIsTheOneAtItsBase) {
  AllocationRegistry registry;
  const Allocation old = registry.Insert(0x1000, 100, Backing::kManaged, false, true);
  const Allocation other = registry.Insert(0x9000, 10, Backing::kManaged, false, true);
  const Allocation again = registry.Insert(0x1000, 40, Backing::kDevice, false, false);
  EXPECT_FALSE(registry.EraseIfCurrent(old));
  EXPECT_EQ(registry.Find(0x1010)->id, again.id);
  EXPECT_EQ(registry.live_bytes(), 50u);
  EXPECT_TRUE(registry.EraseIfCurrent(other));
  EXPECT_FALSE(registry.Find(0x9000).has_value());
  EXPECT_EQ(registry.live_bytes(), 40u);
  EXPECT_FALSE(registry.EraseIfCurrent(other));
}

TEST(AllocationRegistry, ConcurrentInsertFindErase) {
  AllocationRegistry registry;
  constexpr int kThreads = 4;
  constexpr uint64_t kPerThread = 2000;
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&registry, t] {
      const uint64_t start = (static_cast<uint64_t>(t) + 1) << 32;
      for (uint64_t i = 0; i < kPerThread; ++i) {
        const uint64_t base = start + i * 0x1000;
        registry.Insert(base, 0x800, Backing::kManaged, false, true);
        const auto found = registry.Find(base + 0x7ff);
        if (!found.has_value() || found->base != base) std::abort();
        if (i % 2 == 0) registry.Erase(base);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  EXPECT_EQ(registry.count(), kThreads * kPerThread);
  EXPECT_EQ(registry.live_bytes(), kThreads * kPerThread / 2 * 0x800);
  EXPECT_EQ(registry.Snapshot().size(), kThreads * kPerThread / 2);
}

}  // namespace
}  // namespace spillway::policy
