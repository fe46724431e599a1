// Partial residency of a tracked allocation (policy/engine/tracked_allocation.h): a schedule's
// moves of some chunks keep the engine's count of what is on the device exact.
#include "policy/engine/tracked_allocation.h"

#include "common/cost_model.h"
#include "gtest/gtest.h"

namespace spillway::policy {
namespace {

TrackedAllocation Make(uint64_t base, uint64_t size, uint64_t granule) {
  TrackedAllocation t;
  t.base = base;
  t.size = size;
  t.footprint = GranuleFootprint(base, size, granule);
  return t;
}

TEST(TrackedAllocation, ChunksMovedOutAndInKeepTheCountOfWhatIsThere) {
  const uint64_t base = 64 * kChunkBytes;
  TrackedAllocation t = Make(base, 3 * kChunkBytes, 1);
  uint64_t resident = 0;
  MarkResident(&t, &resident);
  EXPECT_EQ(resident, 3 * kChunkBytes);
  // The middle chunk leaves: partly resident.
  MovePart(&t, base + kChunkBytes, kChunkBytes, /*in=*/false, 1, &resident);
  EXPECT_FALSE(t.resident);
  EXPECT_EQ(t.part_in, 2 * kChunkBytes);
  EXPECT_EQ(OnDevice(t), 2 * kChunkBytes);
  EXPECT_EQ(Missing(t), kChunkBytes);
  EXPECT_EQ(resident, 2 * kChunkBytes);
  // Gone already: nothing changes.
  MovePart(&t, base + kChunkBytes, kChunkBytes, false, 1, &resident);
  EXPECT_EQ(resident, 2 * kChunkBytes);
  // There already: nothing changes.
  MovePart(&t, base, kChunkBytes, true, 1, &resident);
  EXPECT_EQ(resident, 2 * kChunkBytes);
  // Back: wholly resident again.
  MovePart(&t, base + kChunkBytes, kChunkBytes, true, 1, &resident);
  EXPECT_TRUE(t.resident);
  EXPECT_EQ(t.part_in, 0u);
  EXPECT_TRUE(t.absent_chunks.empty());
  EXPECT_EQ(resident, 3 * kChunkBytes);
  // Out chunk by chunk: wholly absent at the end, no partial state left.
  for (uint64_t c = 0; c < 3; ++c) {
    MovePart(&t, base + c * kChunkBytes, kChunkBytes, false, 1, &resident);
  }
  EXPECT_FALSE(t.resident);
  EXPECT_EQ(t.part_in, 0u);
  EXPECT_TRUE(t.absent_chunks.empty());
  EXPECT_EQ(resident, 0u);
}

TEST(TrackedAllocation, AChunkComingInToAnAbsentAllocationMakesItPartlyResident) {
  const uint64_t base = 8 * kChunkBytes;
  TrackedAllocation t = Make(base, 4 * kChunkBytes, 1);
  uint64_t resident = 5;  // others' bytes
  MovePart(&t, base + 2 * kChunkBytes, 2 * kChunkBytes, true, 1, &resident);
  EXPECT_FALSE(t.resident);
  EXPECT_EQ(OnDevice(t), 2 * kChunkBytes);
  EXPECT_EQ(resident, 5 + 2 * kChunkBytes);
  // The engine's own moves take or send the whole allocation: only what is missing, or there.
  MarkResident(&t, &resident);
  EXPECT_EQ(resident, 5 + 4 * kChunkBytes);
  MovePart(&t, base, kChunkBytes, false, 1, &resident);
  EXPECT_EQ(MarkAbsent(&t, &resident), 3 * kChunkBytes);
  EXPECT_EQ(resident, 5u);
  EXPECT_TRUE(t.absent_chunks.empty());
}

TEST(TrackedAllocation, ChunksOfAnUnalignedAllocationCountTheirGranules) {
  // 64 KiB granules; the allocation starts 100 KiB into a chunk and ends 100 KiB into the third.
  constexpr uint64_t kGranule = 64 << 10, kSkew = 100 << 10;
  const uint64_t base = 4 * kChunkBytes + kSkew;
  TrackedAllocation t = Make(base, 2 * kChunkBytes, kGranule);
  uint64_t resident = 0;
  MarkResident(&t, &resident);
  const uint64_t footprint = t.footprint;
  EXPECT_EQ(footprint, GranuleFootprint(base, 2 * kChunkBytes, kGranule));
  uint64_t gone = 0;
  for (uint64_t c = 4; c <= 6; ++c) {
    const uint64_t begin = std::max(base, c * kChunkBytes);
    const uint64_t end = std::min(base + 2 * kChunkBytes, (c + 1) * kChunkBytes);
    MovePart(&t, begin, end - begin, false, kGranule, &resident);
    gone += GranuleFootprint(begin, end - begin, kGranule);
    EXPECT_EQ(resident, footprint - gone) << "chunk " << c;
  }
  EXPECT_EQ(resident, 0u);
  EXPECT_TRUE(t.absent_chunks.empty());
}

TEST(TrackedAllocation, AnyOnDeviceAsksTheChunksOfARange) {
  const uint64_t base = 16 * kChunkBytes;
  TrackedAllocation t = Make(base, 3 * kChunkBytes, 1);
  uint64_t resident = 0;
  EXPECT_FALSE(AnyOnDevice(t, base, 3 * kChunkBytes));
  MarkResident(&t, &resident);
  EXPECT_TRUE(AnyOnDevice(t, base + kChunkBytes, 1));
  MovePart(&t, base, 2 * kChunkBytes, /*in=*/false, 1, &resident);  // chunks 0 and 1 leave
  EXPECT_FALSE(AnyOnDevice(t, base, 2 * kChunkBytes));
  EXPECT_TRUE(AnyOnDevice(t, base + kChunkBytes, 2 * kChunkBytes));
  EXPECT_TRUE(AnyOnDevice(t, base + 2 * kChunkBytes + 5, 1));
}

// A schedule's chunks count from the allocation's start: in an allocation that starts inside a
// 2 MiB block, its chunk 0 covers the end of one block and the start of the next. A block counts as
// gone only when all of the allocation's bytes in it left; one coming in counts when any of it did.
// The count errs high, never low.
TEST(TrackedAllocation, AnUnalignedAllocationsBlockLeavesOnlyWhenAllOfItsBytesDo) {
  constexpr uint64_t kSkew = 100 << 10;
  const uint64_t base = 4 * kChunkBytes + kSkew;  // blocks 4, 5 and 6
  TrackedAllocation t = Make(base, 2 * kChunkBytes, 1);
  uint64_t resident = 0;
  MarkResident(&t, &resident);
  const uint64_t in_block_4 = kChunkBytes - kSkew, in_block_6 = kSkew;
  // Its chunk 0 leaves: block 4 is gone; block 5 keeps its last 2 MiB - 100 KiB.
  MovePart(&t, base, kChunkBytes, /*in=*/false, 1, &resident);
  EXPECT_EQ(resident, 2 * kChunkBytes - in_block_4);
  // Its chunk 1 leaves: block 6 is gone; block 5 counts as there still (part of it left each time).
  MovePart(&t, base + kChunkBytes, kChunkBytes, false, 1, &resident);
  EXPECT_EQ(resident, kChunkBytes);
  EXPECT_EQ(OnDevice(t), kChunkBytes);
  // The whole of it leaving is exact again.
  MovePart(&t, base, 2 * kChunkBytes, false, 1, &resident);
  EXPECT_EQ(resident, 0u);
  // Its chunk 0 comes in: blocks 4 and 5 count, all they hold of it.
  MovePart(&t, base, kChunkBytes, true, 1, &resident);
  EXPECT_EQ(resident, 2 * kChunkBytes - in_block_6);
}

}  // namespace
}  // namespace spillway::policy
