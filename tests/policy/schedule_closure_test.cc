// CloseSchedule (policy/planner/schedule_closure.h) on hand-made steps whose folded schedules do
// not repeat (a chunk evicted and never brought back, a chunk loaded while resident, an eviction
// of an absent chunk, a fresh chunk with no populate, a load ahead of its use where the device is
// full), and the planner's plans for random steps
// checked against an independent walk of the step followed round and round: every use finds its
// chunk resident, no load finds it resident, no eviction finds it absent, and the device holds
// no more than the budget at any launch.
#include "policy/planner/schedule_closure.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "policy/plan/workload_model.h"
#include "policy/planner/planner.h"
#include "policy/planner/simulator_replay.h"
#include "tests/policy/random_step.h"

namespace spillway::policy {
namespace {

// A step over `allocations` persistent allocations of one chunk each (ids 1..), launch i using
// the ids in uses[i].
Workload PersistentStep(int allocations, const std::vector<std::vector<uint64_t>>& uses) {
  Workload w;
  w.name = "closure";
  for (int i = 1; i <= allocations; ++i) {
    WorkloadAllocation a;
    a.id = static_cast<uint64_t>(i);
    a.bytes = kChunkBytes;
    a.persistent = true;
    w.allocations.push_back(a);
  }
  for (const std::vector<uint64_t>& ids : uses) {
    StepEvent e;
    e.launch.kernel = "k";
    for (const uint64_t id : ids) e.launch.accesses.push_back(ChunkRange{id, 0, 1});
    w.step.push_back(e);
  }
  return w;
}

std::vector<uint64_t> Budget(std::vector<int> chunks) {
  std::vector<uint64_t> budget;
  for (const int c : chunks) budget.push_back(uint64_t(c) * kChunkBytes);
  return budget;
}

// The moves of `schedule` as (position, kind, chunk), sorted.
std::vector<std::tuple<uint32_t, ChunkMoveKind, uint32_t>> Moves(const FoldedSchedule& schedule) {
  std::vector<std::tuple<uint32_t, ChunkMoveKind, uint32_t>> out;
  for (uint32_t q = 0; q < schedule.size(); ++q) {
    for (const ChunkMove& m : schedule[q]) out.emplace_back(q, m.kind, m.chunk);
  }
  std::sort(out.begin(), out.end());
  return out;
}

using Tuple = std::tuple<uint32_t, ChunkMoveKind, uint32_t>;

TEST(CloseSchedule, KeepsAChunkEvictedAndNeverBroughtBackWhereThereIsRoom) {
  // Chunk 0 (allocation 1) is used at launch 0 only; the schedule evicts it at 2 and never loads
  // it: the next step's launch 0 would fault it in. There is room for it all along.
  const Replay r = BuildReplay(PersistentStep(3, {{1}, {2}, {3}, {2}}));
  FoldedSchedule schedule(4);
  schedule[2].push_back({ChunkMoveKind::kEvict, 0});
  const ClosureStats stats = CloseSchedule(r, 3 * kChunkBytes, Budget({3, 3, 3, 3}),
                                           std::vector<char>(r.total_chunks, 0), 1, &schedule);
  EXPECT_EQ(stats.evictions_dropped, 1u);
  EXPECT_EQ(stats.loads_added, 0u);
  EXPECT_EQ(stats.over_capacity_positions, 0u);
  EXPECT_TRUE(Moves(schedule).empty());
}

TEST(CloseSchedule, BringsAnEvictedChunkBackAsEarlyAsTheRoomAllows) {
  // As above, but launch 3 has room only for the other two: chunk 0 comes back at launch 4.
  const Replay r = BuildReplay(PersistentStep(3, {{1}, {2}, {3}, {2}, {3}, {2}}));
  FoldedSchedule schedule(6);
  schedule[2].push_back({ChunkMoveKind::kEvict, 0});
  const ClosureStats stats = CloseSchedule(r, 3 * kChunkBytes, Budget({3, 3, 3, 2, 3, 3}),
                                           std::vector<char>(r.total_chunks, 0), 1, &schedule);
  EXPECT_EQ(stats.loads_added, 1u);
  EXPECT_EQ(stats.evictions_dropped, 0u);
  EXPECT_EQ(stats.over_capacity_positions, 0u);
  EXPECT_EQ(Moves(schedule),
            (std::vector<Tuple>{{2, ChunkMoveKind::kEvict, 0}, {4, ChunkMoveKind::kPrefetch, 0}}));
}

TEST(CloseSchedule, EvictsAChunkLoadedWhileResidentAfterItsLastUse) {
  // Chunk 0 is loaded at launch 4 and never evicted: at the next step's launch 4 it is resident
  // already, where the plan counted its room free. It goes out after its use at 0 (one launch of
  // guard), and comes in again at 4.
  const Replay r = BuildReplay(PersistentStep(2, {{1}, {2}, {2}, {2}, {1}, {2}}));
  FoldedSchedule schedule(6);
  schedule[4].push_back({ChunkMoveKind::kPrefetch, 0});
  const ClosureStats stats = CloseSchedule(r, 2 * kChunkBytes, Budget({2, 2, 2, 2, 2, 2}),
                                           std::vector<char>(r.total_chunks, 0), 1, &schedule);
  EXPECT_EQ(stats.evictions_added, 1u);
  EXPECT_EQ(Moves(schedule),
            (std::vector<Tuple>{{2, ChunkMoveKind::kEvict, 0}, {4, ChunkMoveKind::kPrefetch, 0}}));
}

TEST(CloseSchedule, DropsAnEvictionOfAnAbsentChunk) {
  // Evicted at 2 and again at 3; launch 3 has room only for chunk 1, so chunk 0 comes back at
  // the use itself (launch 0).
  const Replay r = BuildReplay(PersistentStep(2, {{1}, {2}, {2}, {2}}));
  FoldedSchedule schedule(4);
  schedule[2].push_back({ChunkMoveKind::kEvict, 0});
  schedule[3].push_back({ChunkMoveKind::kEvict, 0});
  const ClosureStats stats = CloseSchedule(r, 2 * kChunkBytes, Budget({2, 2, 2, 1}),
                                           std::vector<char>(r.total_chunks, 0), 1, &schedule);
  EXPECT_EQ(stats.absent_evictions_dropped, 1u);
  EXPECT_EQ(stats.loads_added, 1u);
  EXPECT_EQ(stats.over_capacity_positions, 0u);
  EXPECT_EQ(Moves(schedule),
            (std::vector<Tuple>{{0, ChunkMoveKind::kPrefetch, 0}, {2, ChunkMoveKind::kEvict, 0}}));
}

TEST(CloseSchedule, PopulatesAFreshChunkFromItsAllocation) {
  // Allocation 2 is made before launch 1, used at 2 and freed after 3; the schedule has no
  // populate for it. It holds no data: populated (no copy) from its allocation on.
  Workload w = PersistentStep(2, {});
  w.allocations[1].persistent = false;
  const auto launch = [&w](std::vector<uint64_t> ids) {
    StepEvent e;
    e.launch.kernel = "k";
    for (const uint64_t id : ids) e.launch.accesses.push_back(ChunkRange{id, 0, 1});
    w.step.push_back(e);
  };
  launch({1});
  w.step.push_back(StepEvent{StepEvent::Kind::kAlloc, 2, {}});
  launch({1});
  launch({2});
  launch({2});
  w.step.push_back(StepEvent{StepEvent::Kind::kFree, 2, {}});
  const Replay r = BuildReplay(w);
  FoldedSchedule schedule(4);
  const ClosureStats stats = CloseSchedule(r, 2 * kChunkBytes, Budget({2, 2, 2, 2}),
                                           std::vector<char>(r.total_chunks, 0), 1, &schedule);
  EXPECT_EQ(stats.loads_added, 1u);
  EXPECT_EQ(Moves(schedule), (std::vector<Tuple>{{1, ChunkMoveKind::kPopulate, 1}}));
}

TEST(CloseSchedule, DelaysALoadAheadOfUseAtALaunchTheDeviceIsTooFullAt) {
  // Two chunks of room. Chunk 2 comes in at launch 1 for its use at 3, beside chunk 0 (evicted
  // only at 2) and chunk 1 (used at 1): three at launch 1. Its load goes after launch 1.
  const Replay r = BuildReplay(PersistentStep(3, {{1}, {2}, {2}, {3}}));
  FoldedSchedule schedule(4);
  schedule[0] = {{ChunkMoveKind::kEvict, 2}, {ChunkMoveKind::kPrefetch, 0}};
  schedule[1] = {{ChunkMoveKind::kPrefetch, 1}, {ChunkMoveKind::kPrefetch, 2}};
  schedule[2] = {{ChunkMoveKind::kEvict, 0}};
  schedule[3] = {{ChunkMoveKind::kEvict, 1}};
  const ClosureStats stats = CloseSchedule(r, 2 * kChunkBytes, Budget({2, 2, 2, 2}),
                                           std::vector<char>(r.total_chunks, 0), 1, &schedule);
  EXPECT_EQ(stats.loads_delayed, 1u);
  EXPECT_EQ(stats.over_capacity_positions, 0u);
  EXPECT_EQ(Moves(schedule), (std::vector<Tuple>{{0, ChunkMoveKind::kEvict, 2},
                                                 {0, ChunkMoveKind::kPrefetch, 0},
                                                 {1, ChunkMoveKind::kPrefetch, 1},
                                                 {2, ChunkMoveKind::kEvict, 0},
                                                 {2, ChunkMoveKind::kPrefetch, 2},
                                                 {3, ChunkMoveKind::kEvict, 1}}));
}

TEST(CloseSchedule, DropsALoadWastedAtALaunchTheDeviceIsTooFullAt) {
  // As above, but chunk 2 comes in at launch 1 and goes out at 2 unused (it comes in again at 3
  // for its use): both moves go.
  const Replay r = BuildReplay(PersistentStep(3, {{1}, {2}, {2}, {3}}));
  FoldedSchedule schedule(4);
  schedule[0] = {{ChunkMoveKind::kEvict, 2}, {ChunkMoveKind::kPrefetch, 0}};
  schedule[1] = {{ChunkMoveKind::kPrefetch, 1}, {ChunkMoveKind::kPrefetch, 2}};
  schedule[2] = {{ChunkMoveKind::kEvict, 0}, {ChunkMoveKind::kEvict, 2}};
  schedule[3] = {{ChunkMoveKind::kEvict, 1}, {ChunkMoveKind::kPrefetch, 2}};
  const ClosureStats stats = CloseSchedule(r, 2 * kChunkBytes, Budget({2, 2, 2, 2}),
                                           std::vector<char>(r.total_chunks, 0), 1, &schedule);
  EXPECT_EQ(stats.loads_dropped, 1u);
  EXPECT_EQ(stats.loads_delayed, 0u);
  EXPECT_EQ(stats.over_capacity_positions, 0u);
  EXPECT_EQ(Moves(schedule), (std::vector<Tuple>{{0, ChunkMoveKind::kEvict, 2},
                                                 {0, ChunkMoveKind::kPrefetch, 0},
                                                 {1, ChunkMoveKind::kPrefetch, 1},
                                                 {2, ChunkMoveKind::kEvict, 0},
                                                 {3, ChunkMoveKind::kEvict, 1},
                                                 {3, ChunkMoveKind::kPrefetch, 2}}));
}

TEST(CloseSchedule, LeavesExcludedChunksAlone) {
  const Replay r = BuildReplay(PersistentStep(3, {{1}, {2}, {3}, {2}}));
  FoldedSchedule schedule(4);
  schedule[2].push_back({ChunkMoveKind::kEvict, 0});
  std::vector<char> excluded(r.total_chunks, 0);
  excluded[0] = 1;
  const ClosureStats stats =
      CloseSchedule(r, 3 * kChunkBytes, Budget({3, 3, 3, 3}), excluded, 1, &schedule);
  EXPECT_EQ(stats.changes(), 0u);
  EXPECT_EQ(Moves(schedule), (std::vector<Tuple>{{2, ChunkMoveKind::kEvict, 0}}));
}

// ---- the planner's plans, followed round and round ---------------------------------------------

// What following `plan` step after step does to each chunk, found by walking the step twice from
// nothing resident (the second walk starts from what the first left), with the violations of the
// second walk.
struct FollowedStep {
  int uses_absent = 0, loads_resident = 0, evictions_absent = 0;
  uint64_t most_resident = 0;  // bytes, at a launch of the second walk
};

FollowedStep Follow(const Workload& w, const PolicyFile& plan) {
  std::map<std::pair<uint64_t, uint32_t>, bool> resident;  // (allocation, chunk)
  std::map<std::pair<uint64_t, uint32_t>, uint64_t> bytes;
  for (const WorkloadAllocation& a : w.allocations) {
    for (uint32_t k = 0; k < ChunksOf(a.bytes); ++k) bytes[{a.id, k}] = ChunkFootprint(a.bytes, k);
  }
  std::map<uint32_t, const ScheduleEntry*> at;
  for (const ScheduleEntry& e : plan.schedule) at[e.position] = &e;
  FollowedStep out;
  for (int lap = 0; lap < 2; ++lap) {
    const bool count = lap == 1;
    uint32_t position = 0;
    for (const StepEvent& e : w.step) {
      if (e.kind != StepEvent::Kind::kLaunch) {
        for (uint32_t k = 0; k < ChunksOf(w.allocation(e.alloc_id).bytes); ++k) {
          resident[{e.alloc_id, k}] = false;
        }
        continue;
      }
      if (const auto it = at.find(position); it != at.end()) {
        const auto each = [&](const std::vector<ChunkRange>& ranges, bool in) {
          for (const ChunkRange& c : ranges) {
            for (uint32_t k = c.first_chunk; k < c.first_chunk + c.num_chunks; ++k) {
              bool& r = resident[{c.alloc_id, k}];
              if (count && r == in) ++(in ? out.loads_resident : out.evictions_absent);
              r = in;
            }
          }
        };
        each(it->second->evict, false);
        each(it->second->discard, false);
        each(it->second->prefetch, true);
        each(it->second->populate, true);
      }
      for (const ChunkRange& c : e.launch.accesses) {
        for (uint32_t k = c.first_chunk; k < c.first_chunk + c.num_chunks; ++k) {
          bool& r = resident[{c.alloc_id, k}];
          if (count && !r) ++out.uses_absent;
          r = true;
        }
      }
      if (count) {
        uint64_t total = 0;
        for (const auto& [chunk, in] : resident) total += in ? bytes[chunk] : 0;
        out.most_resident = std::max(out.most_resident, total);
      }
      ++position;
    }
  }
  return out;
}

TEST(CloseSchedule, PlansForRandomStepsRepeatWithinTheBudget) {
  std::mt19937 rng(20261207);
  for (int trial = 0; trial < 60; ++trial) {
    const Workload w = RandomStep(rng, 3 + trial % 5, 2 + trial % 7, 12 + trial % 20, 3);
    // At least the largest launch, so that no launch is paged in and out while it runs.
    uint64_t largest = 0;
    for (const StepEvent& e : w.step) {
      if (e.kind != StepEvent::Kind::kLaunch) continue;
      std::map<std::pair<uint64_t, uint32_t>, uint64_t> chunks;
      for (const ChunkRange& c : e.launch.accesses) {
        for (uint32_t k = c.first_chunk; k < c.first_chunk + c.num_chunks; ++k) {
          chunks[{c.alloc_id, k}] = ChunkFootprint(w.allocation(c.alloc_id).bytes, k);
        }
      }
      uint64_t sum = 0;
      for (const auto& [chunk, b] : chunks) sum += b;
      largest = std::max(largest, sum);
    }
    PlanOptions options;
    options.sim.device_memory =
        std::max<uint64_t>(largest, w.peak_live_bytes() * (2 + trial % 3) / 5) / kPieceBytes *
            kPieceBytes +
        kPieceBytes;
    options.place_on_host = false;
    const absl::StatusOr<PolicyFile> plan = PlanPolicy(w, options);
    ASSERT_TRUE(plan.ok()) << plan.status();
    const FollowedStep f = Follow(w, *plan);
    EXPECT_EQ(f.uses_absent, 0) << "trial " << trial;
    EXPECT_EQ(f.loads_resident, 0) << "trial " << trial;
    EXPECT_EQ(f.evictions_absent, 0) << "trial " << trial;
    EXPECT_LE(f.most_resident, options.sim.capacity_bytes()) << "trial " << trial;
  }
}

}  // namespace
}  // namespace spillway::policy
