// The step simulator on hand-made workloads whose costs can be worked out by hand, and its use of
// the shared cost model.
#include "policy/simulator.h"

#include "gtest/gtest.h"
#include "policy/eviction_policy.h"
#include "policy/synthetic_workloads.h"

namespace spillway::policy {
namespace {

constexpr double kCompute = 1e-3;

// Three one-chunk persistent allocations A, B, C used in the order A B C A, every step.
Workload Cyclic() {
  Workload w;
  w.name = "cyclic";
  for (uint64_t id = 1; id <= 3; ++id) w.allocations.push_back({id, kChunkBytes, "", "", "", true});
  for (uint64_t id : {1, 2, 3, 1}) {
    w.step.push_back({StepEvent::Kind::kLaunch, 0, {"k", kCompute, {{id, 0, 1}}}});
  }
  return w;
}

SimOptions Chunks(uint64_t n) {
  SimOptions o;
  o.device_memory = n * kChunkBytes;
  return o;
}

TEST(Simulator, NothingMovesWhenEverythingFits) {
  const Workload w = Cyclic();
  const SimOptions o = Chunks(3);
  for (const SimResult& r :
       {SimulateDemandPaging(w, o), SimulateEvictionPolicy(w, o, MakeLruPolicy, "lru"),
        ChunkLowerBound(w, o)}) {
    EXPECT_EQ(r.bytes_moved(), 0u) << r.policy;
    EXPECT_EQ(r.demand_faults, 0u) << r.policy;
    EXPECT_DOUBLE_EQ(r.step_seconds, 4 * kCompute) << r.policy;
    EXPECT_DOUBLE_EQ(r.compute_seconds, 4 * kCompute) << r.policy;
  }
}

TEST(Simulator, DemandPagingThrashesInResidencyOrder) {
  // Two chunks for A B C A: in steady state B, C and A fault, each evicting the oldest.
  const SimOptions o = Chunks(2);
  const SimResult r = SimulateDemandPaging(Cyclic(), o);
  EXPECT_EQ(r.demand_faults, 3u);
  EXPECT_EQ(r.fault_batches, 3u);
  EXPECT_EQ(r.h2d_bytes, 3 * kChunkBytes);
  EXPECT_EQ(r.d2h_bytes, 3 * kChunkBytes);
  const double stall = FaultStallSeconds(o.cost, kChunkBytes, kChunkBytes);
  EXPECT_DOUBLE_EQ(r.step_seconds, 4 * kCompute + 3 * stall);
}

TEST(Simulator, BoundIsBeladyWithPerfectOverlap) {
  // Belady keeps A over B at the end of a step (A is needed sooner): two loads, two write-backs.
  const SimOptions o = Chunks(2);
  const SimResult r = ChunkLowerBound(Cyclic(), o);
  EXPECT_EQ(r.h2d_bytes, 2 * kChunkBytes);
  EXPECT_EQ(r.d2h_bytes, 2 * kChunkBytes);
  EXPECT_DOUBLE_EQ(r.step_seconds, 4 * kCompute);  // 4 MiB each way hides behind 4 ms
  SimOptions slow = o;
  slow.cost.h2d_bytes_per_s = 1e9;
  EXPECT_DOUBLE_EQ(ChunkLowerBound(Cyclic(), slow).step_seconds,
                   2.0 * kChunkBytes / slow.cost.h2d_bytes_per_s);
}

TEST(Simulator, LruMovesWholeAllocationsOnTheLaunchStream) {
  // LRU evicts the least recently used: in A B C A with room for two, B C A all miss.
  const SimOptions o = Chunks(2);
  const SimResult r = SimulateEvictionPolicy(Cyclic(), o, MakeLruPolicy, "lru");
  EXPECT_EQ(r.policy, "lru");
  EXPECT_EQ(r.demand_faults, 0u);  // everything was prefetched before its kernel
  EXPECT_EQ(r.h2d_bytes, 3 * kChunkBytes);
  EXPECT_EQ(r.d2h_bytes, 3 * kChunkBytes);
  // Nothing overlaps: each miss costs a write-back then a load before its kernel.
  const double move = D2HSeconds(o.cost, kChunkBytes) + H2DSeconds(o.cost, kChunkBytes);
  EXPECT_NEAR(r.step_seconds, 4 * kCompute + 3 * move, 1e-12);
}

TEST(Simulator, DeadDataIsFreeForTheBound) {
  // A step-local X is written, then unused while Y (2 chunks) runs, then freed: with room for two
  // chunks the bound discards X rather than writing it back.
  Workload w;
  w.allocations = {{1, kChunkBytes, "", "", "", false}, {2, 2 * kChunkBytes, "", "", "", true}};
  w.step = {{StepEvent::Kind::kAlloc, 1, {}},
            {StepEvent::Kind::kLaunch, 0, {"write_x", kCompute, {{1, 0, 1}}}},
            {StepEvent::Kind::kLaunch, 0, {"use_y", kCompute, {{2, 0, 2}}}},
            {StepEvent::Kind::kFree, 1, {}}};
  const SimResult bound = ChunkLowerBound(w, Chunks(2));
  EXPECT_EQ(bound.d2h_bytes, kChunkBytes);  // one chunk of Y makes way for X and comes back
  EXPECT_EQ(bound.h2d_bytes, kChunkBytes);
  EXPECT_EQ(bound.discarded_bytes, kChunkBytes);  // X, dead after its one use
  const SimResult demand = SimulateDemandPaging(w, Chunks(2));
  EXPECT_GT(demand.d2h_bytes, bound.d2h_bytes);  // demand paging writes X back
}

TEST(Simulator, TableHasOneRowPerPolicyWithRatios) {
  const Workload w = Cyclic();
  const SimOptions o = Chunks(2);
  const SimResult bound = ChunkLowerBound(w, o);
  const std::string table = FormatResultTable({SimulateDemandPaging(w, o), bound}, bound);
  EXPECT_NE(table.find("demand"), std::string::npos);
  const std::string last = table.substr(table.rfind("bound"));
  EXPECT_NE(last.find("8.00 MiB"), std::string::npos) << table;
  EXPECT_NE(last.find("1.00"), std::string::npos) << table;
  EXPECT_NE(table.find("12.00 MiB     1.50"), std::string::npos) << table;
}

// The capacity bound over the small synthetic steps, with one shared copy engine and with two, at
// several budgets: every policy's step is at least as long, and with a slower link it grows.
TEST(Simulator, CapacityBoundIsBelowEveryPolicy) {
  for (const char* name : {"transformer-small", "cnn-small"}) {
    absl::StatusOr<Workload> w = MakeSyntheticWorkload(name);
    ASSERT_TRUE(w.ok());
    for (const int engines : {1, 2}) {
      for (const double x : {1.5, 2.0, 4.0, 8.0}) {
        SimOptions o;
        o.cost.copy_engines = engines;
        o.device_memory = static_cast<uint64_t>(static_cast<double>(w->peak_live_bytes()) / x);
        const SimResult cap = CapacityLowerBound(*w, o);
        EXPECT_GE(cap.step_seconds, cap.compute_seconds);
        for (const SimResult& r :
             {SimulateDemandPaging(*w, o), SimulateEvictionPolicy(*w, o, MakeLruPolicy, "lru"),
              SimulateEvictionPolicy(*w, o, MakeLearnedPolicy, "learned")}) {
          EXPECT_GE(r.step_seconds, cap.step_seconds * (1 - 1e-9))
              << name << " " << x << "x " << engines << " engines " << r.policy;
        }
        SimOptions slow = o;
        slow.cost.h2d_bytes_per_s /= 4;
        slow.cost.d2h_bytes_per_s /= 4;
        EXPECT_GT(CapacityLowerBound(*w, slow).step_seconds, cap.step_seconds) << name << " " << x;
      }
    }
  }
}

// Everything fits: the capacity bound is the compute time.
TEST(Simulator, CapacityBoundIsComputeWhenEverythingFits) {
  const SimResult cap = CapacityLowerBound(Cyclic(), Chunks(3));
  EXPECT_DOUBLE_EQ(cap.step_seconds, 4 * kCompute);
  EXPECT_DOUBLE_EQ(cap.compute_seconds, 4 * kCompute);
  // As a last column and a row of its own in the table.
  const SimResult bound = ChunkLowerBound(Cyclic(), Chunks(3));
  const std::string table =
      FormatResultTable({SimulateDemandPaging(Cyclic(), Chunks(3)), bound}, bound, &cap);
  EXPECT_NE(table.find("x cap"), std::string::npos) << table;
  EXPECT_NE(table.find("cap-bound"), std::string::npos) << table;
}

}  // namespace
}  // namespace spillway::policy
