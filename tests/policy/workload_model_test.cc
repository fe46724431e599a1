// The workload model: validation of hand-made steps, peak live bytes, and the fingerprint.
#include "policy/plan/workload_model.h"

#include "gtest/gtest.h"

namespace spillway::policy {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Persistent W (3 MiB: two chunks); the step allocates A (1 MiB), launches on W and A, frees A.
Workload Tiny() {
  Workload w;
  w.name = "tiny";
  w.allocations = {{1, 3 * kMiB, "W", "site", {"mod"}, true},
                   {2, kMiB, "A", "site", {"mod"}, false}};
  StepEvent alloc{StepEvent::Kind::kAlloc, 2, {}};
  StepEvent launch{StepEvent::Kind::kLaunch, 0, {"k", 1e-3, {{1, 0, 2}, {2, 0, 1}}}};
  StepEvent free{StepEvent::Kind::kFree, 2, {}};
  w.step = {alloc, launch, free};
  return w;
}

TEST(WorkloadModel, ValidTinyWorkload) {
  const Workload w = Tiny();
  EXPECT_TRUE(ValidateWorkload(w).ok()) << ValidateWorkload(w);
  EXPECT_EQ(w.num_launches(), 1u);
  EXPECT_DOUBLE_EQ(w.compute_seconds(), 1e-3);
  // As the device backs them: 3 MiB and 1 MiB are whole 4 KiB pages.
  EXPECT_EQ(w.persistent_bytes(), 3 * kMiB);
  EXPECT_EQ(w.peak_live_bytes(), 4 * kMiB);
  EXPECT_EQ(FootprintOf(kChunkBytes + 1), kChunkBytes + kPieceBytes);
  EXPECT_EQ(ChunkFootprint(kChunkBytes + 1, 0), kChunkBytes);
  EXPECT_EQ(ChunkFootprint(kChunkBytes + 1, 1), kPieceBytes);
  EXPECT_EQ(ChunksOf(1), 1u);
  EXPECT_EQ(ChunksOf(kChunkBytes), 1u);
  EXPECT_EQ(ChunksOf(kChunkBytes + 1), 2u);
}

// The launch taking the most device bytes: each distinct chunk once, at its footprint (a chunk
// named twice, or by two ranges, counts once).
TEST(WorkloadModel, LargestLaunchCountsEachChunkOnce) {
  Workload w = Tiny();
  StepEvent second{StepEvent::Kind::kLaunch, 0, {"big", 1e-3, {{1, 0, 2}, {1, 1, 1}, {2, 0, 1}}}};
  w.step.insert(w.step.begin() + 2, second);  // after the first launch, before A's free
  ASSERT_TRUE(ValidateWorkload(w).ok()) << ValidateWorkload(w);
  const Workload::LargestLaunch largest = w.largest_launch();
  EXPECT_EQ(largest.bytes, 4 * kMiB);  // W's 3 MiB (2 MiB + 1 MiB) and A's 1 MiB
  EXPECT_EQ(largest.position, 0u);     // the first of two equal ones
  EXPECT_EQ(largest.kernel, "k");
  w.step[1].launch.accesses = {{1, 0, 2}};  // the first: W alone
  EXPECT_EQ(w.largest_launch().position, 1u);
  EXPECT_EQ(w.largest_launch().kernel, "big");
  w.allocations[1].bytes = kMiB + 8192;  // A: whole 4 KiB pages
  EXPECT_EQ(w.largest_launch().bytes, 4 * kMiB + 8192);
  EXPECT_EQ(Workload{}.largest_launch().bytes, 0u);
}

TEST(WorkloadModel, ValidationNamesTheProblem) {
  Workload w = Tiny();
  w.step[1].launch.accesses[0].num_chunks = 3;
  EXPECT_EQ(ValidateWorkload(w).message(), "step event 1: chunks [0, +3) outside allocation 1");
  w = Tiny();
  w.step.erase(w.step.begin());
  EXPECT_EQ(ValidateWorkload(w).message(), "step event 0: access to allocation 2 that is not live");
  w = Tiny();
  w.step.pop_back();
  EXPECT_EQ(ValidateWorkload(w).message(), "allocation 2 is still live at the end of the step");
  w = Tiny();
  w.step[0].alloc_id = 1;
  EXPECT_EQ(ValidateWorkload(w).message(),
            "step event 0: persistent allocation 1 allocated or freed");
  w = Tiny();
  w.allocations[1].id = 7;
  EXPECT_EQ(ValidateWorkload(w).message(), "allocation #1 has id 7, expected 2");
  w = Tiny();
  w.step[1].launch.accesses[0].alloc_id = 9;
  EXPECT_EQ(ValidateWorkload(w).message(), "step event 1: access to unknown allocation 9");
}

// Sizes the simulator and the planner cannot hold (state per 2 MiB chunk, 32-bit chunk numbers)
// are refused before anything counts chunks: 2^53 bytes would be 2^32 chunks, 0 in 32 bits.
TEST(WorkloadModel, ValidationRefusesSizesBeyondTheModelsBounds) {
  Workload w = Tiny();
  w.allocations[0].bytes = uint64_t{1} << 53;
  EXPECT_EQ(ValidateWorkload(w).message(),
            "allocation 1 has 9007199254740992 bytes, more than the 1 TiB one may have");
  w.allocations[0].bytes = kMaxAllocationBytes + 1;
  EXPECT_EQ(ValidateWorkload(w).message(),
            "allocation 1 has 1099511627777 bytes, more than the 1 TiB one may have");
  w.allocations[0].bytes = kMaxAllocationBytes;
  EXPECT_TRUE(ValidateWorkload(w).ok()) << ValidateWorkload(w);
  // 16 TiB in all at most.
  for (uint64_t id = 3; id <= 17; ++id) {
    w.allocations.push_back({id, kMaxAllocationBytes, "W", "site", {}, true});
  }
  EXPECT_EQ(ValidateWorkload(w).message(),
            "its allocations span 8388609 2 MiB chunks, more than the 8388608 (16 TiB) a workload "
            "may span");
  w.allocations.pop_back();
  EXPECT_TRUE(ValidateWorkload(w).ok()) << ValidateWorkload(w);
}

TEST(WorkloadModel, FingerprintSeesLaunchesAndAllocationsButNotTimes) {
  const Workload w = Tiny();
  Workload slower = Tiny();
  slower.step[1].launch.compute_seconds = 5;
  EXPECT_EQ(WorkloadFingerprint(w), WorkloadFingerprint(slower));
  Workload renamed = Tiny();
  renamed.step[1].launch.kernel = "other";
  EXPECT_NE(WorkloadFingerprint(w), WorkloadFingerprint(renamed));
  Workload bigger = Tiny();
  bigger.allocations[1].bytes = 2 * kMiB;
  EXPECT_NE(WorkloadFingerprint(w), WorkloadFingerprint(bigger));
}

}  // namespace
}  // namespace spillway::policy
