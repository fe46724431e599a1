// The residency engine's finer-grained accounting: arenas (large allocations reached through
// interior pointers) move per 2 MiB chunk, allocations count as the granules they span, and the
// learned policy predicts the sizes of the allocations the next launches will make. A policy that
// needs arenas whole gets a split arena back as one allocation. A memset discards, per chunk, what
// it overwrites that is not on the device.
#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "policy/engine/residency_engine.h"
#include "tests/policy/fake_device.h"

namespace spillway::policy {
namespace {

using testing::AllocateManaged;
using testing::DeviceCall;
using testing::FakeDevice;

constexpr uint64_t kMiB = 1ull << 20;
Stream const kStream = reinterpret_cast<Stream>(0x5);

class ArenaTest : public ::testing::Test {
 protected:
  ArenaTest() : engine_(&device_, MakeLruPolicy(), 64 * kMiB, EngineOptions{0}) {}

  Allocation Managed(uint64_t bytes) {
    uint64_t address = 0;
    device_.AllocateManaged(&address, bytes);
    const Allocation allocation = registry_.Insert(address, bytes, Backing::kManaged, false, true);
    engine_.OnAllocated(allocation);
    return allocation;
  }
  // A launch whose parameters hold `pointers`; returns the ranges it prefetched.
  std::vector<std::pair<uint64_t, uint64_t>> Launch(const std::vector<uint64_t>& pointers) {
    AccessSet access;
    registry_.FindAll(pointers.data(), pointers.size(), &access);
    const size_t before = device_.calls.size();
    EXPECT_EQ(engine_.OnLaunch(access, pointers, kStream), 0);
    std::vector<std::pair<uint64_t, uint64_t>> ranges;
    for (size_t c = before; c < device_.calls.size(); ++c) {
      const DeviceCall& call = device_.calls[c];
      if (call.what == "to_device") ranges.emplace_back(call.address, call.bytes);
    }
    return ranges;
  }
  using Ranges = std::vector<std::pair<uint64_t, uint64_t>>;

  FakeDevice device_;
  AllocationRegistry registry_;
  ResidencyEngine engine_;
};

TEST_F(ArenaTest, AnInteriorPointerMovesOnlyTheChunksUpToTheNextOffsetSeen) {
  const Allocation arena = Managed(32 * kMiB);
  // The first pointer names the arena from its offset to the end: chunks 12..15.
  EXPECT_EQ(Launch({arena.base + 24 * kMiB}), (Ranges{{arena.base + 24 * kMiB, 2 * kMiB},
                                                      {arena.base + 26 * kMiB, 2 * kMiB},
                                                      {arena.base + 28 * kMiB, 2 * kMiB},
                                                      {arena.base + 30 * kMiB, 2 * kMiB}}));
  EXPECT_EQ(engine_.resident_estimate(), 8 * kMiB);
  // A pointer at 17 MiB names chunks 8..11 (up to 24 MiB, the next offset seen).
  EXPECT_EQ(Launch({arena.base + 17 * kMiB}), (Ranges{{arena.base + 16 * kMiB, 2 * kMiB},
                                                      {arena.base + 18 * kMiB, 2 * kMiB},
                                                      {arena.base + 20 * kMiB, 2 * kMiB},
                                                      {arena.base + 22 * kMiB, 2 * kMiB}}));
  // Its base pointer now names chunks 0..8 (up to 17 MiB); chunk 8 is resident already.
  const Ranges base = Launch({arena.base});
  ASSERT_EQ(base.size(), 8u);
  EXPECT_EQ(base.front(), std::make_pair(arena.base, 2 * kMiB));
  EXPECT_EQ(base.back(), std::make_pair(arena.base + 14 * kMiB, 2 * kMiB));
  EXPECT_EQ(engine_.resident_estimate(), 32 * kMiB);
  // 40 MiB more sends 8 MiB of the arena out: frees are discarded from then on.
  const Allocation other = Managed(40 * kMiB);
  Launch({other.base});
  EXPECT_TRUE(engine_.DiscardsFrees());
  // Freed: every chunk forgotten, the whole allocation discarded.
  EXPECT_EQ(engine_.OnFree(arena, kStream), 0);
  EXPECT_EQ(engine_.resident_estimate(), 40 * kMiB);
  ASSERT_EQ(device_.Calls("discard").size(), 1u);
  EXPECT_EQ(device_.Calls("discard")[0].bytes, 32 * kMiB);
}

TEST_F(ArenaTest, ChunksOfAnArenaAreEvictedOneByOne) {
  const Allocation arena = Managed(48 * kMiB);
  const Allocation other = Managed(32 * kMiB);
  Launch({arena.base + 8 * kMiB});  // chunks 4..23: 40 MiB
  Launch({arena.base});             // chunks 0..3: 8 MiB, 48 MiB resident
  Launch({other.base});             // 32 MiB more: 16 MiB of the arena must go, not all of it
  uint64_t evicted = 0;
  for (const DeviceCall& call : device_.Calls("to_host")) {
    EXPECT_EQ(call.bytes, 2 * kMiB);
    EXPECT_TRUE(arena.Contains(call.address));
    evicted += call.bytes;
  }
  EXPECT_EQ(evicted, 16 * kMiB);
  EXPECT_LE(engine_.resident_estimate(), engine_.budget_bytes());
}

TEST_F(ArenaTest, SmallOrBasePointerOnlyAllocationsStayWhole) {
  const Allocation small = Managed(8 * kMiB);   // below kArenaMinBytes: interior pointer or not
  const Allocation large = Managed(16 * kMiB);  // only ever reached through its base
  EXPECT_EQ(Launch({small.base + 6 * kMiB}), (Ranges{{small.base, 8 * kMiB}}));
  EXPECT_EQ(Launch({large.base}), (Ranges{{large.base, 16 * kMiB}}));
}

// A policy that needs arenas whole (a schedule to follow, policy/plan/planned_policy.h) from some
// launch on: the engine merges the arena it has split back into one allocation, resident (with
// the whole footprint) because some chunk was, and the policy sees the allocation again, not its
// chunks. lru otherwise.
class WholeArenasFromSomeLaunch final : public EvictionPolicy {
 public:
  std::string_view name() const override { return "whole-from"; }
  void ObserveLaunch(const LaunchView& launch) override {
    seen_.assign(launch.ids, launch.ids + launch.count);
  }
  void Touch(uint64_t id) override { lru_->Touch(id); }
  void Forget(uint64_t id) override {
    lru_->Forget(id);
    forgotten_.push_back(id);
  }
  void Split(uint64_t id) override {
    lru_->Split(id);
    split_.push_back(id);
  }
  void Merged(uint64_t id) override {
    lru_->Merged(id);
    merged_.push_back(id);
  }
  uint64_t PickVictim(bool (*evictable)(const void*, uint64_t), const void* context) override {
    return lru_->PickVictim(evictable, context);
  }
  bool ArenasWhole() const override { return whole_; }

  bool whole_ = false;
  std::vector<uint64_t> seen_, forgotten_, split_, merged_;

 private:
  std::unique_ptr<EvictionPolicy> lru_ = MakeLruPolicy();
};

// Before a memset: the whole 2 MiB chunks of its range that are not on the device are discarded
// on its stream (their data is dead: the memset writes every byte), merged into ranges; partial
// chunks, resident chunks and anything outside a managed allocation are left alone.
TEST_F(ArenaTest, AMemsetDiscardsTheWholeChunksItOverwritesThatAreNotOnTheDevice) {
  const Allocation small = Managed(8 * kMiB);  // tracked whole
  ASSERT_EQ(small.base % (2 * kMiB), 0u);
  EXPECT_EQ(engine_.OnOverwrite(small, small.base + kMiB, 6 * kMiB, kStream), 0);
  ASSERT_EQ(device_.Calls("discard").size(), 1u);
  EXPECT_EQ(device_.Calls("discard")[0].address, small.base + 2 * kMiB);
  EXPECT_EQ(device_.Calls("discard")[0].bytes, 4 * kMiB);
  EXPECT_EQ(device_.Calls("discard")[0].stream, kStream);
  EXPECT_EQ(engine_.overwrite_discard_bytes(), 4 * kMiB);
  EXPECT_EQ(engine_.discard_bytes(), 0u);
  // Past the allocation's end (the driver refuses such a memset), or no whole chunk: nothing.
  EXPECT_EQ(engine_.OnOverwrite(small, small.base + 4 * kMiB, 6 * kMiB, kStream), 0);
  EXPECT_EQ(engine_.OnOverwrite(small, small.base + kMiB, 2 * kMiB, kStream), 0);
  EXPECT_EQ(device_.Calls("discard").size(), 1u);
  // On the device: the memset writes it there, nothing to discard.
  Launch({small.base});
  EXPECT_EQ(engine_.OnOverwrite(small, small.base, 8 * kMiB, kStream), 0);
  EXPECT_EQ(device_.Calls("discard").size(), 1u);

  // An arena: only its chunks that are not resident (chunks 12..15 are), in one range; then,
  // after the discard, each of those chunks is brought in on the memset's stream (zero-filled).
  const Allocation arena = Managed(32 * kMiB);
  Launch({arena.base + 24 * kMiB});
  const size_t before = device_.calls.size();
  EXPECT_EQ(engine_.OnOverwrite(arena, arena.base, 32 * kMiB, kStream), 0);
  ASSERT_EQ(device_.Calls("discard").size(), 2u);
  EXPECT_EQ(device_.Calls("discard")[1].address, arena.base);
  EXPECT_EQ(device_.Calls("discard")[1].bytes, 24 * kMiB);
  EXPECT_EQ(engine_.overwrite_discard_bytes(), 28 * kMiB);
  Ranges in;
  for (size_t c = before; c < device_.calls.size(); ++c) {
    const DeviceCall& call = device_.calls[c];
    if (call.what == "discard") {
      EXPECT_TRUE(in.empty()) << "a prefetch before the discard";
    }
    if (call.what == "to_device") {
      EXPECT_EQ(call.stream, kStream);
      in.emplace_back(call.address, call.bytes);
    }
  }
  ASSERT_EQ(in.size(), 12u);
  EXPECT_EQ(in.front(), std::make_pair(arena.base, 2 * kMiB));
  EXPECT_EQ(in.back(), std::make_pair(arena.base + 22 * kMiB, 2 * kMiB));
  EXPECT_EQ(engine_.resident_estimate(), 40 * kMiB);  // the small allocation and the whole arena

  // Device memory is not the engine's to discard.
  uint64_t address = 0;
  device_.AllocateDevice(&address, 4 * kMiB);
  const Allocation plain = registry_.Insert(address, 4 * kMiB, Backing::kDevice, false, true);
  engine_.OnAllocated(plain);
  EXPECT_EQ(engine_.OnOverwrite(plain, plain.base, 4 * kMiB, kStream), 0);
  EXPECT_EQ(device_.Calls("discard").size(), 2u);

  // A failed discard is counted as a failure and not as bytes discarded; the data still comes in.
  device_.discard_result = 1;  // CUDA_ERROR_INVALID_VALUE
  const Allocation other = Managed(4 * kMiB);
  EXPECT_EQ(engine_.OnOverwrite(other, other.base, 4 * kMiB, kStream), 1);
  EXPECT_EQ(engine_.overwrite_discard_bytes(), 28 * kMiB);
  EXPECT_EQ(engine_.resident_estimate(), 48 * kMiB);  // with the 4 MiB of device memory
  // A device that cannot discard at all (a driver before CUDA 13.0): no failure, and not asked
  // again; what the memsets cover still comes in.
  device_.discard_result = kDeviceNotSupported;
  const size_t calls = device_.Calls("discard").size();
  const Allocation first = Managed(4 * kMiB), second = Managed(4 * kMiB);
  EXPECT_EQ(engine_.OnOverwrite(first, first.base, 4 * kMiB, kStream), 0);
  EXPECT_EQ(engine_.OnOverwrite(second, second.base, 4 * kMiB, kStream), 0);
  EXPECT_EQ(device_.Calls("discard").size(), calls + 1);
  EXPECT_EQ(engine_.overwrite_discard_bytes(), 28 * kMiB);
  EXPECT_EQ(engine_.resident_estimate(), 56 * kMiB);
}

// A memset over data off the device that does not fit beside what is resident: room is made by
// evicting (the least recently used, with lru) on the memset's stream, after the discard and
// before the data comes in.
TEST(OverwriteTest, AMemsetMakesRoomForWhatItOverwrites) {
  FakeDevice device;
  AllocationRegistry registry;
  ResidencyEngine engine(&device, MakeLruPolicy(), 8 * kMiB, EngineOptions{0});
  std::vector<Allocation> allocations;
  for (int i = 0; i < 3; ++i) {
    allocations.push_back(AllocateManaged(device, registry, engine, 4 * kMiB));
  }
  for (int i = 0; i < 2; ++i) {
    AccessSet access;
    access.push_back(allocations[i]);
    EXPECT_EQ(engine.OnLaunch(access, kStream), 0);
  }
  const size_t before = device.calls.size();
  const Allocation& third = allocations[2];
  EXPECT_EQ(engine.OnOverwrite(third, third.base, 4 * kMiB, kStream), 0);
  std::vector<std::string> moves;
  for (size_t c = before; c < device.calls.size(); ++c) {
    const DeviceCall& call = device.calls[c];
    if (call.what != "discard" && call.what != "to_host" && call.what != "to_device") continue;
    EXPECT_EQ(call.stream, kStream);
    moves.push_back(call.what + (call.address == allocations[0].base ? " first" : "") +
                    (call.address == third.base ? " third" : ""));
  }
  EXPECT_EQ(moves, (std::vector<std::string>{"discard third", "to_host first", "to_device third"}));
  EXPECT_EQ(engine.resident_estimate(), 8 * kMiB);
  EXPECT_EQ(engine.evict_bytes(), 4 * kMiB);
}

// A memset's moves wait, on its own stream, for the eviction of what it brings back in, even where
// the thread's launch before it waited for that eviction on another stream; and an eviction of
// what it used waits for its stream.
TEST(OverwriteTest, AMemsetWaitsOnItsStreamForTheEvictionOfWhatItBringsIn) {
  FakeDevice device;
  AllocationRegistry registry;
  ResidencyEngine engine(&device, MakeLruPolicy(), 8 * kMiB, EngineOptions{4});  // side streams
  auto managed = [&](uint64_t bytes) { return AllocateManaged(device, registry, engine, bytes); };
  const Allocation a = managed(4 * kMiB), b = managed(4 * kMiB), c = managed(8 * kMiB);
  Stream const s1 = reinterpret_cast<Stream>(0x11), s2 = reinterpret_cast<Stream>(0x12),
               s3 = reinterpret_cast<Stream>(0x13);
  auto launch = [&](const Allocation& allocation, Stream stream) {
    AccessSet access;
    access.push_back(allocation);
    EXPECT_EQ(engine.OnLaunch(access, stream), 0);
  };
  launch(a, s1);
  launch(b, s1);
  // c takes the whole budget: a and b go out on s1, followed by one order event there.
  const size_t before_c = device.calls.size();
  launch(c, s1);
  Event evicted = nullptr;
  for (size_t i = before_c; i < device.calls.size(); ++i) {
    if (device.calls[i].what == "record" && device.calls[i].stream == s1)
      evicted = device.calls[i].event;
  }
  ASSERT_NE(evicted, nullptr);
  // a comes back on s2, which waits for that event (and c goes out there).
  launch(a, s2);
  // A memset over b on s3: b comes back after s3 waits for the same event.
  const size_t before = device.calls.size();
  EXPECT_EQ(engine.OnOverwrite(b, b.base, 4 * kMiB, s3), 0);
  bool waited = false, in = false;
  for (size_t i = before; i < device.calls.size(); ++i) {
    const DeviceCall& call = device.calls[i];
    if (call.what == "wait" && call.stream == s3 && call.event == evicted) waited = true;
    if (call.what == "to_device" && call.address == b.base) {
      EXPECT_TRUE(waited) << "b came in on s3 before its eviction on s1 was waited for";
      in = true;
    }
    // a, which the memset does not touch, may go; the memset's own range may not.
    if (call.what == "to_host") {
      EXPECT_NE(call.address, b.base);
    }
  }
  EXPECT_TRUE(in);
  // b, last used by the memset on s3, goes out on s1 only after s1 waits for s3.
  const size_t before_out = device.calls.size();
  launch(c, s1);
  Event after_memset = nullptr;
  bool ordered = false, out = false;
  for (size_t i = before_out; i < device.calls.size(); ++i) {
    const DeviceCall& call = device.calls[i];
    if (call.what == "record" && call.stream == s3) after_memset = call.event;
    if (call.what == "wait" && call.stream == s1 && call.event == after_memset) ordered = true;
    if (call.what == "to_host" && call.address == b.base) {
      EXPECT_TRUE(ordered) << "b went out on s1 without waiting for the memset's stream";
      out = true;
    }
  }
  EXPECT_TRUE(out);
}

// The chunks of an arena a memset touches that are on the device stay there while room is made for
// the rest of its range, although they are the least recently used: `other` goes instead.
TEST_F(ArenaTest, AMemsetKeepsWhatItTouchesOnTheDevice) {
  ResidencyEngine engine(&device_, MakeLruPolicy(), 10 * kMiB, EngineOptions{0});
  auto managed = [&](uint64_t bytes) { return AllocateManaged(device_, registry_, engine, bytes); };
  const Allocation arena = managed(16 * kMiB), other = managed(4 * kMiB), last = managed(2 * kMiB);
  auto launch = [&](const std::vector<uint64_t>& pointers) {
    AccessSet access;
    registry_.FindAll(pointers.data(), pointers.size(), &access);
    EXPECT_EQ(engine.OnLaunch(access, pointers, kStream), 0);
  };
  launch({arena.base + 12 * kMiB});  // chunks 6 and 7
  launch({other.base});
  launch({last.base});  // the latest launch's data is not evicted in any case
  const size_t before = device_.calls.size();
  EXPECT_EQ(engine.OnOverwrite(arena, arena.base + 8 * kMiB, 8 * kMiB, kStream), 0);
  Ranges out;
  for (size_t i = before; i < device_.calls.size(); ++i) {
    if (device_.calls[i].what == "to_host") {
      out.emplace_back(device_.calls[i].address, device_.calls[i].bytes);
    }
  }
  EXPECT_EQ(out, (Ranges{{other.base, 4 * kMiB}}));
  EXPECT_EQ(engine.resident_estimate(), 10 * kMiB);  // chunks 4..7 and `last`
}

// `none` issues no device call of its own: a memset pages as it would without spillway.
TEST(OverwriteTest, TheNonePolicyDiscardsNothing) {
  FakeDevice device;
  AllocationRegistry registry;
  ResidencyEngine engine(&device, MakeNoMovePolicy(), 64 * kMiB, EngineOptions{0});
  const Allocation allocation = AllocateManaged(device, registry, engine, 8 * kMiB);
  EXPECT_EQ(engine.OnOverwrite(allocation, allocation.base, 8 * kMiB, kStream), 0);
  EXPECT_TRUE(device.Calls("discard").empty());
}

TEST(ArenaMergeTest, APolicyThatNeedsArenasWholeGetsTheSplitArenaBackWhole) {
  FakeDevice device;
  AllocationRegistry registry;
  auto owned = std::make_unique<WholeArenasFromSomeLaunch>();
  WholeArenasFromSomeLaunch* policy = owned.get();
  ResidencyEngine engine(&device, std::move(owned), 64 * kMiB, EngineOptions{0});
  uint64_t address = 0;
  device.AllocateManaged(&address, 32 * kMiB);
  const Allocation arena = registry.Insert(address, 32 * kMiB, Backing::kManaged, false, true);
  engine.OnAllocated(arena);
  auto launch = [&](uint64_t pointer) {
    AccessSet access;
    registry.FindAll(&pointer, 1, &access);
    EXPECT_EQ(engine.OnLaunch(access, {pointer}, kStream), 0);
  };
  launch(arena.base + 24 * kMiB);  // split: chunks 12..15 come in
  ASSERT_EQ(policy->seen_.size(), 4u);
  EXPECT_TRUE(IsArenaPiece(policy->seen_[0]));
  EXPECT_EQ(ArenaPieceAllocation(policy->seen_[0]), arena.id);
  EXPECT_EQ(ArenaPieceChunk(policy->seen_[0]), 12u);
  EXPECT_EQ(engine.resident_estimate(), 8 * kMiB);
  EXPECT_EQ(policy->split_, std::vector<uint64_t>{arena.id});

  policy->whole_ = true;
  const size_t before = device.calls.size();
  launch(arena.base + 24 * kMiB);
  EXPECT_EQ(policy->seen_, std::vector<uint64_t>{arena.id});
  EXPECT_EQ(policy->merged_, std::vector<uint64_t>{arena.id});
  // Every chunk was forgotten (16 of them), the allocation itself never.
  EXPECT_EQ(policy->forgotten_.size(), 16u);
  EXPECT_EQ(std::count(policy->forgotten_.begin(), policy->forgotten_.end(), arena.id), 0);
  // Merged partly resident, as its chunks were (8 of its 32 MiB); the launch now uses it whole, so
  // the engine brings it in (the driver moves what is missing) and counts it all, sending out
  // nothing.
  EXPECT_EQ(engine.resident_estimate(), 32 * kMiB);
  size_t in = 0;
  for (size_t c = before; c < device.calls.size(); ++c) {
    EXPECT_NE(device.calls[c].what, "to_host");
    if (device.calls[c].what == "to_device") {
      ++in;
      EXPECT_EQ(device.calls[c].address, arena.base);
      EXPECT_EQ(device.calls[c].bytes, 32 * kMiB);
    }
  }
  EXPECT_EQ(in, 1u);
}

TEST(FootprintTest, AllocationsCountAsTheGranulesTheySpan) {
  FakeDevice device;
  AllocationRegistry registry;
  ResidencyEngine engine(&device, MakeLruPolicy(), 64 * kMiB, EngineOptions{0, 2 * kMiB});
  uint64_t address = 0;
  device.AllocateManaged(&address, 1);
  const Allocation tiny = registry.Insert(address, 1, Backing::kManaged, false, true);
  engine.OnAllocated(tiny);
  ASSERT_EQ(engine.OnLaunch(AccessSet{tiny}, kStream), 0);
  EXPECT_EQ(engine.resident_estimate(), 2 * kMiB);
  // Moves are still of the allocation's own bytes.
  ASSERT_EQ(device.Calls("to_device").size(), 1u);
  EXPECT_EQ(device.Calls("to_device")[0].bytes, 1u);
  // 2 MiB starting 1 MiB into a granule spans two.
  const uint64_t unaligned = (address / (2 * kMiB) + 4) * (2 * kMiB) + kMiB;
  const Allocation straddling =
      registry.Insert(unaligned, 2 * kMiB, Backing::kManaged, false, true);
  engine.OnAllocated(straddling);
  ASSERT_EQ(engine.OnLaunch(AccessSet{straddling}, kStream), 0);
  EXPECT_EQ(engine.resident_estimate(), 6 * kMiB);
}

TEST(PredictUnallocatedTest, TheLearnedPolicyNamesTheSizesOfAllocationsNotMadeYet) {
  std::unique_ptr<EvictionPolicy> policy = MakeLearnedPolicy();
  uint64_t next_id = 1000;
  // Each step: weight 1 (1 MiB) with a fresh 3 MiB activation, then weight 2 (2 MiB) alone.
  const auto step = [&] {
    const uint64_t activation = next_id++;
    const uint64_t ids[] = {1, activation}, sizes[] = {kMiB, 3 * kMiB};
    policy->ObserveLaunch(LaunchView{7, ids, sizes, 2});
    for (const uint64_t id : ids) policy->Touch(id);
    const uint64_t ids2[] = {2}, sizes2[] = {2 * kMiB};
    policy->ObserveLaunch(LaunchView{8, ids2, sizes2, 1});
    policy->Touch(2);
    policy->Forget(activation);
  };
  std::vector<uint64_t> sizes;
  StepPredictor* const predictor = policy->step_predictor();
  ASSERT_NE(predictor, nullptr);
  predictor->PredictUnallocated(2, &sizes);
  EXPECT_TRUE(sizes.empty());  // no step known yet
  for (int i = 0; i < 40; ++i) step();
  ASSERT_NE(predictor->step_length(), 0u);
  predictor->PredictUnallocated(1, &sizes);  // next: weight 1 and an activation not made yet
  EXPECT_EQ(sizes, (std::vector<uint64_t>{3 * kMiB}));
  predictor->PredictUnallocated(2, &sizes);
  EXPECT_EQ(sizes, (std::vector<uint64_t>{3 * kMiB}));
  // lru predicts nothing.
  std::unique_ptr<EvictionPolicy> lru = MakeLruPolicy();
  EXPECT_EQ(lru->step_predictor(), nullptr);
}

}  // namespace
}  // namespace spillway::policy
