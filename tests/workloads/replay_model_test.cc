// The replayer's small models: the caching allocator of --alloc arena (caching_arena.h), the
// written ranges (written_ranges.h), --touch (replay_options.h), and the values the kernels
// write and check
// (replay_kernel_abi.h): a byte's value does not depend on how the ranges that wrote it were
// cut, so the same bytes read the same in every run, and a changed byte changes the check.
#include <cstring>
#include <vector>

#include "gtest/gtest.h"
#include "workloads/replay/caching_arena.h"
#include "workloads/replay/replay_kernel_abi.h"
#include "workloads/replay/replay_options.h"
#include "workloads/replay/written_ranges.h"

namespace spillway::replay {
namespace {

using spillway_replay::AccessUnits;
using spillway_replay::kModeRead;
using spillway_replay::kModeReadWrite;
using spillway_replay::kModeWrite;
using spillway_replay::kTouchAll;
using spillway_replay::kTouchPage;
using spillway_replay::TouchUnit;

constexpr uint64_t kMiB = 1 << 20;

class ArenaTest : public ::testing::Test {
 protected:
  CachingArena arena_{[this](uint64_t bytes) -> absl::StatusOr<uint64_t> {
    const uint64_t address = next_;
    next_ += bytes + (1ull << 30);  // segments apart
    made_.push_back(bytes);
    return address;
  }};
  uint64_t next_ = 1ull << 40;
  std::vector<uint64_t> made_;
};

TEST_F(ArenaTest, SegmentSizesFollowTheRequest) {
  EXPECT_EQ(CachingArena::RoundSize(1), 512u);
  EXPECT_EQ(CachingArena::RoundSize(513), 1024u);
  ASSERT_TRUE(arena_.Allocate(100).ok());            // small pool: a 2 MiB segment
  ASSERT_TRUE(arena_.Allocate(2 * kMiB).ok());       // large, under 10 MiB: 20 MiB
  ASSERT_TRUE(arena_.Allocate(13 * kMiB).ok());      // fits in what that segment has left
  ASSERT_TRUE(arena_.Allocate(21 * kMiB + 1).ok());  // larger: rounded up to 2 MiB
  EXPECT_EQ(made_, (std::vector<uint64_t>{2 * kMiB, 20 * kMiB, 22 * kMiB}));
  EXPECT_EQ(arena_.segment_bytes(), 44 * kMiB);
}

TEST_F(ArenaTest, SmallRequestsShareASegmentAndFreedBlocksAreReused) {
  const uint64_t a = *arena_.Allocate(1000);
  const uint64_t b = *arena_.Allocate(1000);
  EXPECT_EQ(b, a + 1024);
  EXPECT_EQ(made_.size(), 1u);
  arena_.Free(a);
  EXPECT_EQ(*arena_.Allocate(600), a);                 // the best fit: the freed 1024-byte block
  EXPECT_EQ(arena_.allocated_bytes(), 1024u + 1024u);  // 600 got the whole block (424 < 512)
}

TEST_F(ArenaTest, BestFitTakesTheSmallestFreeBlockThatHolds) {
  const uint64_t a = *arena_.Allocate(4 * kMiB);
  const uint64_t gap = *arena_.Allocate(kMiB + 512);
  const uint64_t b = *arena_.Allocate(3 * kMiB);
  const uint64_t keep = *arena_.Allocate(kMiB + 512);
  (void)gap;
  (void)keep;
  arena_.Free(a);
  arena_.Free(b);
  EXPECT_EQ(*arena_.Allocate(3 * kMiB), b);
  EXPECT_EQ(made_.size(), 1u);
}

TEST_F(ArenaTest, FreedNeighboursJoinAndALargeBlockIsSplitOnlyForMoreThan1MiB) {
  const uint64_t a = *arena_.Allocate(2 * kMiB);
  const uint64_t b = *arena_.Allocate(2 * kMiB);
  arena_.Free(a);
  arena_.Free(b);
  // a and b joined the rest of the 20 MiB segment: a request for all of it fits there.
  EXPECT_EQ(*arena_.Allocate(20 * kMiB - 512 * 1024), a);  // 512 KiB left: not split off
  EXPECT_EQ(arena_.allocated_bytes(), 20 * kMiB);
  EXPECT_EQ(made_.size(), 1u);
}

TEST(WrittenRanges, AddJoinsAndSplitCoversInOrder) {
  WrittenRanges w;
  w.Add(100, 200);
  w.Add(300, 400);
  w.Add(200, 250);  // touches: joined
  EXPECT_EQ(w.ranges(), (std::vector<std::pair<uint64_t, uint64_t>>{{100, 250}, {300, 400}}));
  std::vector<std::tuple<uint64_t, uint64_t, bool>> pieces;
  w.Split(0, 350, [&](uint64_t b, uint64_t e, bool written) { pieces.push_back({b, e, written}); });
  EXPECT_EQ(pieces, (std::vector<std::tuple<uint64_t, uint64_t, bool>>{
                        {0, 100, false}, {100, 250, true}, {250, 300, false}, {300, 350, true}}));
  w.Add(0, 1000);
  EXPECT_EQ(w.ranges(), (std::vector<std::pair<uint64_t, uint64_t>>{{0, 1000}}));
}

// Applies one access of launch `sequence` to `memory` (tensor `tag`); the sum of its checks.
uint64_t Touch(std::vector<unsigned char>& memory, uint64_t offset, uint64_t bytes, uint32_t mode,
               bool all, uint64_t sequence, uint64_t* checked_bytes = nullptr) {
  const AccessUnits units = AccessUnits::Of(offset, bytes, all ? kTouchAll : kTouchPage);
  uint64_t sum = 0, total = 0;
  for (uint64_t u = 0; u < units.count(); ++u) {
    uint64_t checked = 0;
    sum += TouchUnit(memory.data(), units, u, mode, sequence, 5, &checked);
    total += checked;
  }
  if (checked_bytes != nullptr) *checked_bytes = total;
  return sum;
}

TEST(ReplayValues, HowAWriteIsCutDoesNotChangeTheBytes) {
  for (const bool all : {true, false}) {
    SCOPED_TRACE(all ? "touch=all" : "touch=page");
    std::vector<unsigned char> whole(20000, 0xAA), cut(20000, 0x55);
    Touch(whole, 0, 20000, kModeWrite, all, 9);
    Touch(cut, 0, 4099, kModeWrite, all, 9);
    Touch(cut, 4099, 5, kModeWrite, all, 9);
    Touch(cut, 4104, 15896, kModeWrite, all, 9);
    // Read-write XORs in the next op's values, cut differently again.
    Touch(whole, 3, 19990, kModeReadWrite, all, 10);
    Touch(cut, 3, 8190, kModeReadWrite, all, 10);
    Touch(cut, 8193, 11800, kModeReadWrite, all, 10);
    if (all) {
      EXPECT_EQ(whole.size(), cut.size());
      EXPECT_TRUE(std::memcmp(whole.data() + 3, cut.data() + 3, 19990) == 0);
    }
    EXPECT_EQ(Touch(whole, 0, 20000, kModeRead, all, 11), Touch(cut, 0, 20000, kModeRead, all, 11));
  }
}

TEST(ReplayValues, ALostOrStaleByteChangesTheCheck) {
  for (const bool all : {true, false}) {
    SCOPED_TRACE(all ? "touch=all" : "touch=page");
    std::vector<unsigned char> memory(3 * 4096);
    Touch(memory, 0, memory.size(), kModeWrite, all, 1);
    std::vector<unsigned char> stale = memory;  // what op 1 left
    Touch(memory, 0, memory.size(), kModeReadWrite, all, 2);
    uint64_t checked = 0;
    const uint64_t good = Touch(memory, 0, memory.size(), kModeRead, all, 3, &checked);
    EXPECT_EQ(checked, all ? memory.size() : 3 * 8);
    EXPECT_NE(Touch(stale, 0, stale.size(), kModeRead, all, 3), good);
    std::vector<unsigned char> lost = memory;
    std::memset(lost.data() + 4096, 0, 4096);  // a page lost (a discarded page reads zeroes)
    EXPECT_NE(Touch(lost, 0, lost.size(), kModeRead, all, 3), good);
    std::vector<unsigned char> flipped = memory;
    flipped[8192] ^= 1;
    EXPECT_NE(Touch(flipped, 0, flipped.size(), kModeRead, all, 3), good);
  }
}

TEST(ReplayValues, TouchPageTouchesEveryPageOfTheRangeAndItsEnds) {
  // [100, 10000): windows at 4096 and 8192; the first byte (100) and the last (9999) touched.
  const AccessUnits units = AccessUnits::Of(100, 9900, kTouchPage);
  EXPECT_EQ(units.first_window, 1u);
  EXPECT_EQ(units.windows, 2u);
  EXPECT_TRUE(units.touch_first);
  EXPECT_TRUE(units.touch_last);
  EXPECT_EQ(units.count(), 4u);
  // A tiny range inside one window: that window, nothing else.
  const AccessUnits tiny = AccessUnits::Of(4097, 3, kTouchPage);
  EXPECT_EQ(tiny.windows, 1u);
  EXPECT_EQ(tiny.count(), 1u);
  // touch=all: 5 head bytes, 2 words, 3 tail bytes.
  const AccessUnits all = AccessUnits::Of(3, 24, kTouchAll);
  EXPECT_EQ(all.count(), 5u + 2 + 3);
}

TEST(ReplayValues, AStrideTouchesOneWindowEachStride) {
  // --touch 64KiB over [0, 256 KiB): 4 windows, both ends inside windows' pages but not in
  // them: the last byte touched apart.
  const AccessUnits units = AccessUnits::Of(0, 256 << 10, 16);
  EXPECT_EQ(units.windows, 4u);
  EXPECT_FALSE(units.touch_first);
  EXPECT_TRUE(units.touch_last);
  EXPECT_EQ(units.WindowStart(3), 3u << 16);
  std::vector<unsigned char> memory(256 << 10);
  uint64_t checked = 0;
  const AccessUnits write = AccessUnits::Of(0, memory.size(), 16);
  for (uint64_t u = 0; u < write.count(); ++u) {
    TouchUnit(memory.data(), write, u, kModeWrite, 1, 5, &checked);
  }
  uint64_t sum = 0, total = 0;
  for (uint64_t u = 0; u < units.count(); ++u) {
    sum += TouchUnit(memory.data(), units, u, kModeRead, 2, 5, &checked);
    total += checked;
  }
  EXPECT_EQ(total, 4u * 8);
  memory[2 << 16] ^= 0x80;
  uint64_t changed = 0;
  for (uint64_t u = 0; u < units.count(); ++u) {
    changed += TouchUnit(memory.data(), units, u, kModeRead, 2, 5, &checked);
  }
  EXPECT_NE(changed, sum);
}

TEST(ReplayOptions, TouchTakesPageAllOrAPowerOfTwo) {
  const auto parse = [](const char* touch) {
    const char* argv[] = {"spillway-replay", "t.trace", "--touch", touch};
    return ParseReplayOptions(4, argv);
  };
  EXPECT_EQ(parse("all")->touch, kTouchAll);
  EXPECT_EQ(parse("page")->touch, kTouchPage);
  EXPECT_EQ(parse("64KiB")->touch, 16);
  EXPECT_EQ(parse("16")->touch, 4);
  EXPECT_EQ(TouchName(16), "65536");
  EXPECT_EQ(TouchName(kTouchPage), "page");
  for (const char* bad : {"8", "3000", "2GiB", "pages"}) {
    EXPECT_FALSE(parse(bad).ok()) << bad;
  }
  const char* missing[] = {"spillway-replay", "--steps", "3"};
  EXPECT_EQ(ParseReplayOptions(3, missing).status().message(), "no trace given");
  const char* steps[] = {"spillway-replay", "t", "--steps", "0"};
  EXPECT_EQ(ParseReplayOptions(4, steps).status().message(),
            "--steps: '0' is not an integer from 1 to 1000000");
}

TEST(ReplayValues, NoParameterWordButThePointersCanLookLikeOne) {
  // The top bit is set in every other word; a user-space address never has it.
  EXPECT_NE(spillway_replay::PackExtent(kModeRead, 1) >> 63, 0u);
  EXPECT_NE(spillway_replay::PackKey(0, 0) >> 63, 0u);
  EXPECT_NE(spillway_replay::PackControl(0, kTouchAll, 0) >> 63, 0u);
  const uint64_t control = spillway_replay::PackControl(64, spillway_replay::kMaxStrideLog2, 1);
  EXPECT_EQ(spillway_replay::ControlSlots(control), 64);
  EXPECT_EQ(spillway_replay::ControlTouch(control), spillway_replay::kMaxStrideLog2);
  EXPECT_EQ(spillway_replay::ControlLane(control), 1);
  const uint64_t key = spillway_replay::PackKey(12345, (1ull << 40) - 1);
  EXPECT_EQ(spillway_replay::KeyTag(key), 12345u);
  EXPECT_EQ(spillway_replay::KeyOffset(key), (1ull << 40) - 1);
  const uint64_t extent = spillway_replay::PackExtent(kModeReadWrite, (1ull << 48) - 1);
  EXPECT_EQ(spillway_replay::ExtentMode(extent), kModeReadWrite);
  EXPECT_EQ(spillway_replay::ExtentBytes(extent), (1ull << 48) - 1);
}

}  // namespace
}  // namespace spillway::replay
