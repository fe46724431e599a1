// The step simulator on hand-made workloads whose costs can be worked out by hand, and its use of
// the shared cost model.
#include "policy/planner/simulator.h"

#include <algorithm>
#include <string>
#include <vector>

#include "common/cost_model.h"
#include "gtest/gtest.h"
#include "policy/engine/eviction_policy.h"
#include "policy/planner/planner.h"
#include "policy/planner/simulator_timeline_device.h"
#include "policy/planner/synthetic_workloads.h"

namespace spillway::policy {
namespace {

constexpr double kCompute = 1e-3;

// Three one-chunk persistent allocations A, B, C used in the order A B C A, every step.
Workload Cyclic() {
  Workload w;
  w.name = "cyclic";
  for (uint64_t id = 1; id <= 3; ++id) w.allocations.push_back({id, kChunkBytes, "", "", {}, true});
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
  // Belady's steps alternate: one that starts with A and C brings B in for A and A back for C (two
  // loads, two write-backs); the next, starting with A and B, brings C in for B (one of each). The
  // bound is the cheaper step.
  const SimOptions o = Chunks(2);
  const SimResult r = ChunkLowerBound(Cyclic(), o);
  EXPECT_EQ(r.h2d_bytes, kChunkBytes);
  EXPECT_EQ(r.d2h_bytes, kChunkBytes);
  EXPECT_DOUBLE_EQ(r.step_seconds, 4 * kCompute);  // 2 MiB each way hides behind 4 ms
  SimOptions slow = o;
  slow.cost.h2d_bytes_per_s = 1e8;
  EXPECT_DOUBLE_EQ(ChunkLowerBound(Cyclic(), slow).step_seconds,
                   1.0 * kChunkBytes / slow.cost.h2d_bytes_per_s);
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
  w.allocations = {{1, kChunkBytes, "", "", {}, false}, {2, 2 * kChunkBytes, "", "", {}, true}};
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
  EXPECT_NE(last.find("4.00 MiB"), std::string::npos) << table;
  EXPECT_NE(last.find("1.00"), std::string::npos) << table;
  EXPECT_NE(table.find("12.00 MiB     3.00"), std::string::npos) << table;
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
              SimulateEvictionPolicy(*w, o, MakeLearnedPolicy, "learned"),
              SimulateEngine(*w, o, MakeLruPolicy, "engine lru"),
              SimulateEngine(*w, o, MakeLearnedPolicy, "engine learned")}) {
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

// A training step in miniature: four one-chunk weights W1..W4; the forward pass makes one-chunk
// activations A1..A4 (Ai with Wi), the backward pass reads them back in reverse with their weights
// and frees them. Two chunks of room. Before the backward pass starts, all eight chunks the forward
// pass touched had a slot, so at least 8 - 2 - 1 went out (one may have been on its way at the
// step's start); from there, the four activations and four weights come back in beyond the two
// the device holds. The window bound counts the weights' slots, not only the activations made.
TEST(Simulator, CapacityBoundCountsTheSlotsAWindowTouches) {
  Workload w;
  w.name = "mini-train";
  for (uint64_t id = 1; id <= 4; ++id) w.allocations.push_back({id, kChunkBytes, "", "", {}, true});
  for (uint64_t id = 5; id <= 8; ++id)
    w.allocations.push_back({id, kChunkBytes, "", "", {}, false});
  constexpr double kTiny = 1e-7;
  for (uint64_t l = 1; l <= 4; ++l) {
    w.step.push_back({StepEvent::Kind::kAlloc, l + 4, {}});
    w.step.push_back({StepEvent::Kind::kLaunch, 0, {"forward", kTiny, {{l, 0, 1}, {l + 4, 0, 1}}}});
  }
  for (uint64_t l = 4; l >= 1; --l) {
    w.step.push_back(
        {StepEvent::Kind::kLaunch, 0, {"backward", kTiny, {{l, 0, 1}, {l + 4, 0, 1}}}});
    w.step.push_back({StepEvent::Kind::kFree, l + 4, {}});
  }
  ASSERT_TRUE(ValidateWorkload(w).ok());
  const SimOptions o = Chunks(2);
  const double h = H2DSeconds(o.cost, kChunkBytes), d = D2HSeconds(o.cost, kChunkBytes);
  const SimResult link = CapacityLowerBound(w, o, /*shared_link=*/true);
  EXPECT_GE(link.step_seconds, 5 * d + 6 * h);
  const SimResult cap = CapacityLowerBound(w, o);
  EXPECT_LE(cap.step_seconds, link.step_seconds);
  for (const SimResult& r : {SimulateDemandPaging(w, o), SimulateEngine(w, o, MakeLruPolicy, "lru"),
                             SimulateEngine(w, o, MakeLearnedPolicy, "learned")}) {
    EXPECT_GE(r.step_seconds, cap.step_seconds * (1 - 1e-9)) << r.policy;
  }
}

// Two three-chunk weights used by long kernels, a one-chunk one by a short kernel between them;
// four chunks of room. When the kernel using A ends, A holds three of the four slots, so at most
// one of B's chunks is on the device or on its way: two come in after it, in the short kernel's
// time or in B's own, and the same for A after B's kernel. The kernel-to-kernel bound counts them
// (at least 4 min(h, d) beyond the long kernels' compute); the window bound sees room enough over
// the step.
TEST(Simulator, CapacityBoundCountsTheSlotsTheKernelBeforeHolds) {
  Workload w;
  w.name = "big-small-big";
  w.allocations.push_back({1, 3 * kChunkBytes, "A", "", {}, true});
  w.allocations.push_back({2, kChunkBytes, "D", "", {}, true});
  w.allocations.push_back({3, 3 * kChunkBytes, "B", "", {}, true});
  constexpr double kLong = 1e-3, kShort = 1e-6;
  w.step.push_back({StepEvent::Kind::kLaunch, 0, {"a", kLong, {{1, 0, 3}}}});
  w.step.push_back({StepEvent::Kind::kLaunch, 0, {"d", kShort, {{2, 0, 1}}}});
  w.step.push_back({StepEvent::Kind::kLaunch, 0, {"b", kLong, {{3, 0, 3}}}});
  ASSERT_TRUE(ValidateWorkload(w).ok());
  const SimOptions o = Chunks(4);
  const double h = H2DSeconds(o.cost, kChunkBytes), d = D2HSeconds(o.cost, kChunkBytes);
  const SimResult cap = CapacityLowerBound(w, o);
  EXPECT_GE(cap.step_seconds, 2 * kLong + 4 * std::min(h, d) - 1e-12);
  for (const SimResult& r : {SimulateDemandPaging(w, o), SimulateEngine(w, o, MakeLruPolicy, "lru"),
                             SimulateEngine(w, o, MakeLearnedPolicy, "learned"),
                             SimulateEvictionPolicy(w, o, MakeLearnedPolicy, "learned model")}) {
    EXPECT_GE(r.step_seconds, cap.step_seconds * (1 - 1e-9)) << r.policy;
  }
  PlanOptions plan_options;
  plan_options.sim = o;
  absl::StatusOr<PolicyFile> plan = PlanPolicy(w, plan_options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  EXPECT_GE(SimulatePlanned(w, *plan, o).step_seconds, cap.step_seconds * (1 - 1e-9));
}

// Eight one-chunk persistent allocations used in turn, each by a kernel of `compute` seconds.
Workload Ring(double compute) {
  Workload w;
  w.name = "ring";
  for (uint64_t id = 1; id <= 8; ++id) w.allocations.push_back({id, kChunkBytes, "", "", {}, true});
  for (uint64_t id = 1; id <= 8; ++id) {
    w.step.push_back(
        {StepEvent::Kind::kLaunch, 0, {"k" + std::to_string(id), compute, {{id, 0, 1}}}});
  }
  return w;
}

TEST(SimulateEngine, NothingMovesWhenEverythingFits) {
  const Workload w = Ring(kCompute);
  const SimResult r = SimulateEngine(w, Chunks(8), MakeLearnedPolicy, "learned");
  EXPECT_EQ(r.policy, "learned");
  EXPECT_EQ(r.bytes_moved(), 0u);
  EXPECT_EQ(r.demand_faults, 0u);
  EXPECT_DOUBLE_EQ(r.step_seconds, 8 * kCompute);
  EXPECT_DOUBLE_EQ(r.compute_seconds, 8 * kCompute);
}

// Compute-bound: a 2 MiB copy each way takes ~0.09 ms against 1 ms kernels. With its lookahead
// the learned engine moves every chunk on the side streams while the kernels run: the step is the
// compute time, with no demand faults. Without it (SPILLWAY_LOOKAHEAD=0) every miss stalls its
// kernel by a write-back and a load on the launch stream.
TEST(SimulateEngine, LookaheadHidesTransfersBehindCompute) {
  const Workload w = Ring(kCompute);
  const SimOptions o = Chunks(4);
  const SimResult ahead = SimulateEngine(w, o, MakeLearnedPolicy, "learned");
  const SimResult off = SimulateEngine(w, o, MakeLearnedPolicy, "learned-nola", {0, false});
  const SimResult bound = ChunkLowerBound(w, o);
  EXPECT_EQ(ahead.demand_faults, 0u);
  EXPECT_GT(ahead.h2d_bytes, 0u);
  EXPECT_GE(ahead.bytes_moved(), bound.bytes_moved());
  EXPECT_NEAR(ahead.step_seconds, 8 * kCompute, 1e-9);
  EXPECT_DOUBLE_EQ(ahead.compute_seconds, 8 * kCompute);
  // Off: the same kind of moves, each in front of its kernel.
  EXPECT_GE(off.bytes_moved(), bound.bytes_moved());
  const double miss = H2DSeconds(o.cost, kChunkBytes);
  EXPECT_GT(off.step_seconds, 8 * kCompute + 4 * miss);
  // The fixed count (SPILLWAY_LOOKAHEAD=4) hides them too.
  const SimResult fixed = SimulateEngine(w, o, MakeLearnedPolicy, "learned-4", {4, false});
  EXPECT_NEAR(fixed.step_seconds, 8 * kCompute, 1e-9);
}

// Transfer-bound (a slow link): the lookahead cannot hide the copies. With or without it, the
// engine never moves fewer bytes than Belady and is never faster than either time bound.
TEST(SimulateEngine, TransferBoundStaysAboveTheBounds) {
  const Workload w = Ring(kCompute / 100);
  SimOptions o = Chunks(4);
  o.cost.h2d_bytes_per_s = 2e9;
  o.cost.d2h_bytes_per_s = 2e9;
  const SimResult ahead = SimulateEngine(w, o, MakeLearnedPolicy, "learned");
  const SimResult off = SimulateEngine(w, o, MakeLearnedPolicy, "learned-nola", {0, false});
  const SimResult cap = CapacityLowerBound(w, o);
  const SimResult bound = ChunkLowerBound(w, o);
  for (const SimResult& r : {ahead, off}) {
    EXPECT_GE(r.bytes_moved(), bound.bytes_moved()) << r.policy;
    EXPECT_GE(r.step_seconds, cap.step_seconds * (1 - 1e-9)) << r.policy;
    EXPECT_GE(r.step_seconds, bound.step_seconds * (1 - 1e-9)) << r.policy;
  }
}

// A 32 MiB arena reached through pointers at chunks 0, 4 and 8, each kernel touching up to the next
// pointer's chunk (a trace's arena ranges as the trace reader narrows them). The engine names each
// pointer's piece only, as the kernels touch: with room for 8 chunks nothing overcommits or
// faults, and every piece is prefetched before its kernel (the last one needs the whole device,
// so not all of it can move ahead).
TEST(SimulateEngine, ArenaPointersNameTheirPieceOnly) {
  Workload w;
  w.name = "arena";
  w.allocations = {{1, 16 * kChunkBytes, "", "", {}, true}};
  const std::vector<ChunkRange> pieces = {{1, 0, 5}, {1, 4, 5}, {1, 8, 8}};
  for (const ChunkRange& piece : pieces) {
    w.step.push_back({StepEvent::Kind::kLaunch,
                      0,
                      {"k" + std::to_string(piece.first_chunk), kCompute, {piece}}});
  }
  const SimResult r = SimulateEngine(w, Chunks(8), MakeLearnedPolicy, "learned");
  EXPECT_EQ(r.overcommit_chunks, 0u);
  EXPECT_EQ(r.demand_faults, 0u);
  EXPECT_GT(r.h2d_bytes, 0u);  // 16 chunks do not fit in 8
  EXPECT_GE(r.step_seconds, 3 * kCompute);
}

// Everything fits: the capacity bound is the compute time.
// A plan's eviction starts after the launches before its position, as the engine issues it (on
// the evict stream after the launch stream's work so far), not right after the victim's last
// use. One chunk of room; A used at launch 0 and B at launch 3; the plan evicts A and prefetches
// B before launch 3 and the reverse before launch 0: each of those launches waits for a copy back
// and a copy in. Priced from the victims' last uses instead, the first wait would vanish.
TEST(Simulator, PlannedEvictionsStartAfterTheLaunchesBeforeThem) {
  Workload w;
  w.name = "late-evict";
  for (uint64_t id = 1; id <= 2; ++id) w.allocations.push_back({id, kChunkBytes, "", "", {}, true});
  for (uint64_t id : {1, 0, 0, 2}) {
    StepEvent e{StepEvent::Kind::kLaunch, 0, {"k", kCompute, {}}};
    if (id != 0) e.launch.accesses.push_back({id, 0, 1});
    w.step.push_back(e);
  }
  ASSERT_TRUE(ValidateWorkload(w).ok());
  PolicyFile plan;
  plan.budget_bytes = kChunkBytes;
  plan.schedule.push_back({0, {{2, 0, 1}}, {}, {{1, 0, 1}}, {}});
  plan.schedule.push_back({3, {{1, 0, 1}}, {}, {{2, 0, 1}}, {}});
  const SimOptions o = Chunks(1);
  const SimResult planned = SimulatePlanned(w, plan, o);
  EXPECT_EQ(planned.demand_faults, 0u);
  const double swap = D2HSeconds(o.cost, kChunkBytes) + H2DSeconds(o.cost, kChunkBytes);
  EXPECT_NEAR(planned.step_seconds, 4 * kCompute + 2 * swap, 1e-9);
}

// The engine replayed following a plan with a host rule places that allocation on the host as a
// run does (cuMemAdvise on simgpu): its kernels read it over the link, priced as SimulatePlanned
// prices it, and it never faults or moves.
TEST(SimulateEngine, FollowingAPlanPlacesHostRuleAllocationsOnTheHost) {
  const Workload w = Cyclic();
  PlanOptions options;
  options.sim = Chunks(2);
  options.place_on_host = false;
  PolicyRule host;
  host.first_order = host.last_order = 1;
  host.action = RuleAction::kHost;
  options.rules = {host};
  absl::StatusOr<PolicyFile> plan = PlanPolicy(w, options);
  ASSERT_TRUE(plan.ok()) << plan.status();
  const SimResult model = SimulatePlanned(w, *plan, options.sim);
  const SimResult engine = SimulateEngineFollowing(w, *plan, options.sim);
  // A is used twice a step: read and written back over the link each time.
  EXPECT_EQ(model.remote_bytes, 2 * 2 * kChunkBytes);
  EXPECT_EQ(engine.remote_bytes, model.remote_bytes);
  EXPECT_EQ(engine.demand_faults, 0u);
  EXPECT_EQ(engine.h2d_bytes + engine.d2h_bytes, model.h2d_bytes + model.d2h_bytes);
  EXPECT_NEAR(engine.step_seconds, model.step_seconds, 1e-9);
}

// The device SimulateEngine runs against counts a chunk that leaves while a kernel issued before
// still uses it: not a write-back ordered behind the kernel by an event, but one issued on another
// stream with no wait, and a discard there.
TEST(TimelineDevice, CountsAChunkThatLeavesWhileAKernelIssuedBeforeStillUsesIt) {
  const std::vector<uint32_t> footprint(2, kChunkBytes);
  TimelineDevice device(footprint, CostModel{}, 2 * kChunkBytes);
  SimResult result;
  device.set_result(&result);
  Stream side = nullptr;
  Event after = nullptr;
  ASSERT_EQ(device.CreateSideStream(&side), kDeviceOk);
  ASSERT_EQ(device.CreateEvent(&after), kDeviceOk);
  const uint64_t chunk0 = kTimelineAddressBase, chunk1 = kTimelineAddressBase + kChunkBytes;
  ASSERT_EQ(device.PrefetchToDevice(chunk0, kChunkBytes, device.job_stream()), kDeviceOk);
  device.Launch(device.job_stream(), {0}, kCompute);
  ASSERT_EQ(device.RecordEvent(after, device.job_stream()), kDeviceOk);
  ASSERT_EQ(device.StreamWaitEvent(side, after), kDeviceOk);
  ASSERT_EQ(device.PrefetchToHost(chunk0, kChunkBytes, side), kDeviceOk);
  EXPECT_EQ(result.early_moves, 0u);
  // In again, used, and written back with no wait: the side stream is free long before.
  ASSERT_EQ(device.PrefetchToDevice(chunk0, kChunkBytes, device.job_stream()), kDeviceOk);
  device.Launch(device.job_stream(), {0, 1}, kCompute);
  ASSERT_EQ(device.PrefetchToHost(chunk0, kChunkBytes, side), kDeviceOk);
  EXPECT_EQ(result.early_moves, 1u);
  ASSERT_EQ(device.Discard(chunk1, kChunkBytes, side), kDeviceOk);
  EXPECT_EQ(result.early_moves, 2u);
}

// The host thread's clock: each call blocks it for its calibrated cost, and work it issues after
// starts no earlier; a wait for an event takes it to the event's time. The calls are counted.
TEST(TimelineDevice, ACallsCostDelaysWhatTheHostIssuesAfterIt) {
  const std::vector<uint32_t> footprint(2, kChunkBytes);
  CostModel cost;
  cost.calls.prefetch_to_device = {1e-3, 0};
  cost.calls.launch = {1e-4, 0};
  TimelineDevice device(footprint, cost, 2 * kChunkBytes);
  SimResult result;
  device.set_result(&result);
  const double copy = H2DSeconds(cost, kChunkBytes);
  ASSERT_EQ(device.PrefetchToDevice(kTimelineAddressBase, kChunkBytes, device.job_stream()),
            kDeviceOk);
  // The prefetch starts once its call returned; the kernel after it and its own launch call.
  EXPECT_NEAR(device.Launch(device.job_stream(), {0}, kCompute),
              std::max(1e-3 + copy, 1e-3 + 1e-4) + kCompute, 1e-12);
  Event done = nullptr;
  ASSERT_EQ(device.CreateEvent(&done), kDeviceOk);
  ASSERT_EQ(device.RecordEvent(done, device.job_stream()), kDeviceOk);
  const double end = device.compute_free();
  ASSERT_EQ(device.SynchronizeEvent(done), kDeviceOk);
  // A resident chunk moves nothing but its call still blocks the host: 1 ms past the wait.
  ASSERT_EQ(device.PrefetchToDevice(kTimelineAddressBase, kChunkBytes, device.job_stream()),
            kDeviceOk);
  EXPECT_NEAR(device.Launch(device.job_stream(), {0}, kCompute), end + 1e-3 + 1e-4 + kCompute,
              1e-12);
  EXPECT_EQ(result.host_calls, 2u);  // the prefetches; launches are the job's
  EXPECT_NEAR(result.host_call_seconds, 2e-3, 1e-15);
}

// The engine orders every write-back and discard after the kernels issued before it that use the
// chunk, learning, with a fixed lookahead or none, and following a plan, on the synthetic steps
// at every budget and with one or two copy engines.
TEST(SimulateEngine, NoChunkLeavesWhileAKernelIssuedBeforeStillUsesIt) {
  for (const char* name : {"transformer-small", "cnn-small"}) {
    absl::StatusOr<Workload> w = MakeSyntheticWorkload(name);
    ASSERT_TRUE(w.ok());
    for (const int engines : {1, 2}) {
      for (const double x : {1.5, 2.0, 4.0, 8.0}) {
        PlanOptions options;
        options.sim.cost.copy_engines = engines;
        options.sim.device_memory =
            static_cast<uint64_t>(static_cast<double>(w->peak_live_bytes()) / x);
        const SimOptions& o = options.sim;
        absl::StatusOr<PolicyFile> plan = PlanPolicy(*w, options);
        ASSERT_TRUE(plan.ok()) << plan.status();
        for (const SimResult& r :
             {SimulateEngine(*w, o, MakeLruPolicy, "lru"),
              SimulateEngine(*w, o, MakeLearnedPolicy, "learned"),
              SimulateEngine(*w, o, MakeLearnedPolicy, "learned-4", {4, false}),
              SimulateEngine(*w, o, MakeLearnedPolicy, "learned-nola", {0, false}),
              SimulateEngineFollowing(*w, *plan, o)}) {
          EXPECT_EQ(r.early_moves, 0u)
              << name << " " << x << "x " << engines << " engines " << r.policy;
          EXPECT_GT(r.d2h_bytes + r.discarded_bytes, 0u) << name << " " << x << "x " << r.policy;
        }
      }
    }
  }
}

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

// A budget far beyond what the workload uses (--device-memory 1EiB: 2^39 chunks) costs nothing:
// every result, and the plan, are those for a budget that is merely larger than every chunk the
// replay loads (1 TiB), where no slot is ever used twice.
TEST(Simulator, ABudgetFarBeyondTheWorkloadGivesTheResultsOfOneThatFits) {
  absl::StatusOr<Workload> w = MakeSyntheticWorkload("cnn-small");
  ASSERT_TRUE(w.ok());
  SimOptions large, huge;
  large.device_memory = uint64_t{1} << 40;
  huge.device_memory = uint64_t{1} << 60;
  PlanOptions plan_large, plan_huge;
  plan_large.sim = large;
  plan_huge.sim = huge;
  absl::StatusOr<PolicyFile> planned_large = PlanPolicy(*w, plan_large);
  absl::StatusOr<PolicyFile> planned_huge = PlanPolicy(*w, plan_huge);
  ASSERT_TRUE(planned_large.ok()) << planned_large.status();
  ASSERT_TRUE(planned_huge.ok()) << planned_huge.status();
  EXPECT_EQ(planned_huge->budget_bytes, huge.device_memory);
  EXPECT_TRUE(planned_huge->schedule == planned_large->schedule);
  EXPECT_TRUE(planned_huge->rules == planned_large->rules);
  const auto results = [&](const SimOptions& o, const PolicyFile& plan) {
    return std::vector<SimResult>{
        SimulateDemandPaging(*w, o),  SimulateEngine(*w, o, MakeLearnedPolicy, "learned"),
        SimulatePlanned(*w, plan, o), SimulateEngineFollowing(*w, plan, o),
        ChunkLowerBound(*w, o),       CapacityLowerBound(*w, o)};
  };
  const std::vector<SimResult> at_large = results(large, *planned_large);
  const std::vector<SimResult> at_huge = results(huge, *planned_huge);
  ASSERT_EQ(at_huge.size(), at_large.size());
  for (size_t i = 0; i < at_huge.size(); ++i) {
    EXPECT_EQ(at_huge[i].policy, at_large[i].policy);
    EXPECT_EQ(at_huge[i].h2d_bytes, at_large[i].h2d_bytes) << at_huge[i].policy;
    EXPECT_EQ(at_huge[i].d2h_bytes, at_large[i].d2h_bytes) << at_huge[i].policy;
    EXPECT_EQ(at_huge[i].demand_faults, at_large[i].demand_faults) << at_huge[i].policy;
    EXPECT_DOUBLE_EQ(at_huge[i].step_seconds, at_large[i].step_seconds) << at_huge[i].policy;
  }
}

}  // namespace
}  // namespace spillway::policy
