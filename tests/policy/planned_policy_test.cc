// The planned policy in the residency engine, over the fake device: a workload replayed for
// several steps is recognised by its step signature after one step, from then on every launch's
// moves are the policy file's (the same chunk ranges at the same positions, nothing else), and the
// bytes per followed step are the simulator's prediction for the same file. Every fallback (a
// file that is missing, malformed or planned for more memory; a job whose step never matches; a
// job that leaves the step) gives one log line and exactly the learned policy's device calls.
// Rules: `keep` allocations are no victims, `never` ones are not moved, and `host` ones are placed
// on the host once and never moved (a refused placement: one line, and the allocation is swapped).
// An arena moved slice by slice: a launch waits only for the prefetch of the chunks it uses.
// Online planning (the learned policy planning the recorded step itself) plans the step the job
// repeats and follows the plan with the simulator's bytes; a planner that fails leaves the
// learned policy's moves, with one line.
#include "policy/plan/planned_policy.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"
#include "policy/engine/residency_engine.h"
#include "policy/plan/step_events.h"
#include "policy/plan/step_signature.h"
#include "policy/planner/online_plan.h"
#include "policy/planner/planner.h"
#include "policy/planner/simulator.h"
#include "policy/planner/synthetic_workloads.h"
#include "tests/policy/fake_device.h"

namespace spillway::policy {
namespace {

using testing::DeviceCall;
using testing::FakeDevice;

constexpr uint64_t kMiB = 1ull << 20;
Stream const kStream = reinterpret_cast<Stream>(0x5);

// Builds a workload's step event by event.
struct StepBuilder {
  Workload w;
  uint64_t Add(uint64_t bytes, bool persistent) {
    WorkloadAllocation a;
    a.id = w.allocations.size() + 1;
    a.bytes = bytes;
    a.persistent = persistent;
    w.allocations.push_back(a);
    return a.id;
  }
  void Event(uint64_t id, StepEvent::Kind kind) {
    StepEvent e;
    e.kind = kind;
    e.alloc_id = id;
    w.step.push_back(e);
  }
  void Launch(std::vector<ChunkRange> accesses) {
    StepEvent e;
    e.launch.kernel = "k" + std::to_string(w.step.size());
    e.launch.compute_seconds = 1e-4;
    e.launch.accesses = std::move(accesses);
    w.step.push_back(e);
  }
};

// A small training step: three persistent allocations (one of two chunks), two activations (the
// second freed before the last launch, or with `free_y_last` used by the launch before and freed
// after it). With `idle_weight`, a fourth persistent allocation that no launch uses.
Workload SmallStep(uint64_t activation_bytes = 2 * kMiB, bool free_y_last = false,
                   bool idle_weight = false) {
  StepBuilder s;
  s.w.name = "small";
  const uint64_t wa = s.Add(4 * kMiB, true), wb = s.Add(2 * kMiB, true), wc = s.Add(2 * kMiB, true);
  if (idle_weight) s.Add(2 * kMiB, true);
  const uint64_t x = s.Add(activation_bytes, false), y = s.Add(2 * kMiB, false);
  s.Event(x, StepEvent::Kind::kAlloc);
  s.Launch({{wa, 0, 2}, {x, 0, ChunksOf(activation_bytes)}});
  s.Event(y, StepEvent::Kind::kAlloc);
  s.Launch({{wb, 0, 1}, {x, 0, ChunksOf(activation_bytes)}, {y, 0, 1}});
  s.Event(x, StepEvent::Kind::kFree);
  s.Launch({{wc, 0, 1}, {y, 0, 1}});
  if (free_y_last) {
    s.Launch({{wa, 1, 1}, {wc, 0, 1}, {y, 0, 1}});
  } else {
    s.Launch({{wa, 1, 1}, {wc, 0, 1}});
    s.Event(y, StepEvent::Kind::kFree);
  }
  s.Launch({{wb, 0, 1}, {wa, 0, 1}});
  if (free_y_last) s.Event(y, StepEvent::Kind::kFree);
  return s.w;
}

PolicyFile Plan(const Workload& w, uint64_t device_memory) {
  PlanOptions options;
  options.sim.device_memory = device_memory;
  options.place_on_host = false;
  absl::StatusOr<PolicyFile> plan = PlanPolicy(w, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : PolicyFile{};
}

// The bytes of `live` on the device, by the device calls made and the chunks kernels touched
// (`touched`: the number of calls made when the kernel was launched, the chunk's address), which
// the device pages in. For allocations of whole chunks at chunk-aligned addresses.
uint64_t OnDeviceByCalls(const std::vector<DeviceCall>& calls,
                         const std::vector<std::pair<size_t, uint64_t>>& touched,
                         const std::vector<Allocation>& live) {
  std::set<uint64_t> in;  // chunk addresses
  size_t t = 0;
  for (size_t i = 0; i <= calls.size(); ++i) {
    for (; t < touched.size() && touched[t].first == i; ++t) in.insert(touched[t].second);
    if (i == calls.size()) break;
    const DeviceCall& c = calls[i];
    const bool to_device = c.what == "to_device" || c.what == "populate";
    if (!to_device && c.what != "to_host" && c.what != "discard") continue;
    for (uint64_t a = c.address / kChunkBytes * kChunkBytes; a < c.address + c.bytes;
         a += kChunkBytes) {
      if (to_device) {
        in.insert(a);
      } else {
        in.erase(a);
      }
    }
  }
  uint64_t bytes = 0;
  for (const Allocation& a : live) {
    for (uint64_t c = a.base; c < a.base + a.size; c += kChunkBytes) {
      bytes += in.contains(c) ? std::min(kChunkBytes, a.base + a.size - c) : 0;
    }
  }
  return bytes;
}

// Replays a workload against an engine: persistent allocations first, then whole steps.
class Replay {
 public:
  Replay(const Workload& w, std::unique_ptr<EvictionPolicy> policy, uint64_t budget,
         EngineOptions options = {})
      : engine_(&device_, std::move(policy), budget, options),
        w_(w),
        launches_per_step_(std::max<uint64_t>(w.num_launches(), 1)) {}

  void Init() {
    for (const WorkloadAllocation& a : w_.allocations) {
      if (a.persistent) Allocate(a);
    }
  }
  // One step of `w_` (or of `other`, whose persistent allocations must be w_'s).
  void Step(const Workload* other = nullptr) {
    const Workload& w = other != nullptr ? *other : w_;
    for (const StepEvent& e : w.step) {
      if (e.kind == StepEvent::Kind::kAlloc) {
        Allocate(w.allocation(e.alloc_id));
      } else if (e.kind == StepEvent::Kind::kFree) {
        const Allocation a = live_.at(e.alloc_id);
        registry_.Erase(a.base);
        live_.erase(e.alloc_id);
        const size_t before = device_.calls.size();
        engine_.OnFree(a, kStream);
        for (size_t i = before; i < device_.calls.size(); ++i) free_calls_.push_back(i);
      } else {
        AccessSet access;
        for (const ChunkRange& r : e.launch.accesses) {
          const Allocation& a = live_.at(r.alloc_id);
          bool seen = false;
          for (const Allocation& b : access) seen = seen || b.id == a.id;
          if (!seen) access.push_back(a);
        }
        if (before_launch_) before_launch_();
        engine_.OnLaunch(access, stream_of_launch_
                                     ? stream_of_launch_(launches_ % launches_per_step_)
                                     : kStream);
        ++launches_;
        // The kernel pages in what it touches that is not on the device.
        for (const ChunkRange& r : e.launch.accesses) {
          for (uint32_t k = r.first_chunk; k < r.first_chunk + r.num_chunks; ++k) {
            touched_.emplace_back(device_.calls.size(), Address(r.alloc_id, k));
          }
        }
        if (after_launch_) after_launch_();
      }
    }
  }
  // Init, two steps (the policy recognises the step at the end of the first), then a third that
  // is followed throughout; returns the index of its first device call.
  size_t ThirdStepFollowed() {
    Init();
    Step();
    Step();
    const size_t from = device_.calls.size();
    Step();
    EXPECT_EQ(Adherence().steps_followed, 2u);
    return from;
  }
  // The address of chunk `chunk` of policy allocation `w_id` (live now).
  uint64_t Address(uint64_t w_id, uint32_t chunk) const {
    return live_.at(w_id).base + uint64_t{chunk} * kChunkBytes;
  }
  ScheduleAdherence Adherence() const {
    ScheduleAdherence a;
    EXPECT_TRUE(engine_.adherence(&a));
    return a;
  }
  // The bytes of the live allocations on the device (OnDeviceByCalls).
  uint64_t OnDeviceByCalls() const {
    std::vector<Allocation> live;
    for (const auto& [id, a] : live_) live.push_back(a);
    return policy::OnDeviceByCalls(device_.calls, touched_, live);
  }

  // The moves (what, address, bytes) of device calls from index `from` on, without the
  // discards of frees.
  std::vector<std::tuple<std::string, uint64_t, uint64_t>> Moves(size_t from = 0) const {
    std::vector<std::tuple<std::string, uint64_t, uint64_t>> out;
    for (size_t i = from; i < device_.calls.size(); ++i) {
      const DeviceCall& c = device_.calls[i];
      if (std::find(free_calls_.begin(), free_calls_.end(), i) != free_calls_.end()) continue;
      if (c.what == "to_device" || c.what == "to_host" || c.what == "discard" ||
          c.what == "populate") {
        out.emplace_back(c.what, c.address, c.bytes);
      }
    }
    return out;
  }

  FakeDevice device_;
  ResidencyEngine engine_;
  uint64_t launches_ = 0;
  // The stream of each launch by its position in the step (null: all on kStream).
  std::function<Stream(uint64_t position)> stream_of_launch_;
  std::vector<size_t> free_calls_;       // indices of the device calls OnFree made
  bool place_now_ = true;                // OnAllocated's place_now
  size_t placements_at_allocation_ = 0;  // "host" calls OnAllocated made
  std::function<void()> before_launch_;  // called before each launch (null: nothing)
  std::function<void()> after_launch_;   // called after each launch (null: nothing)

 private:
  // Made at the call site the workload names (CallSiteName's hex), as a run takes it; a
  // synthetic workload's labels are no ids (none).
  void Allocate(const WorkloadAllocation& w_a) {
    uint64_t address = 0;
    device_.AllocateManaged(&address, w_a.bytes);
    uint64_t call_site = 0;
    if (!absl::SimpleHexAtoi(w_a.call_site, &call_site)) call_site = 0;
    const Allocation a =
        registry_.Insert(address, w_a.bytes, Backing::kManaged, false, true, 0, call_site);
    live_[w_a.id] = a;
    const size_t before = device_.calls.size();
    engine_.OnAllocated(a, place_now_);
    for (size_t i = before; i < device_.calls.size(); ++i) {
      placements_at_allocation_ += device_.calls[i].what == "host" ? 1 : 0;
    }
  }

  const Workload& w_;
  const uint64_t launches_per_step_;
  AllocationRegistry registry_;
  std::map<uint64_t, Allocation> live_;  // policy number -> engine allocation
  // The chunks each launch touched (their addresses), by the number of device calls made then.
  std::vector<std::pair<size_t, uint64_t>> touched_;
};

struct Logged {
  std::vector<std::string> problems, news;
  PolicyLog Sink() {
    return [this](bool problem, const std::string& line) {
      (problem ? problems : news).push_back(line);
    };
  }
};

std::string WriteTemp(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + "/" + name;
  std::ofstream(path) << text;
  return path;
}

TEST(StepSignature, RollingHashFindsTheStepBoundary) {
  const Workload w = SmallStep();
  const StepSignature sig = ComputeStepSignature(w);
  ASSERT_NE(sig.signature, 0u);
  EXPECT_EQ(sig.persistent, 3u);
  EXPECT_EQ(sig.events, w.step.size());
  // Different activation sizes: a different signature.
  EXPECT_NE(ComputeStepSignature(SmallStep(4 * kMiB)).signature, sig.signature);
}

TEST(PlannedPolicy, FollowsTheScheduleAfterOneStep) {
  const Workload w = SmallStep();
  const uint64_t budget = 6 * kMiB;  // 3 chunks of the 7 the step touches
  const PolicyFile plan = Plan(w, budget);
  ASSERT_NE(plan.step_signature, 0u);
  Logged log;
  Replay replay(w, MakePlannedPolicy(plan, "small.policy.toml", budget, log.Sink()), budget);
  EXPECT_EQ(replay.engine_.policy_name(), "planned");
  replay.Init();
  replay.Step();  // recognised at its end: step 2 is followed
  EXPECT_TRUE(replay.Adherence().aligned);
  EXPECT_EQ(replay.Adherence().positions_followed, 0u);
  replay.Step();
  const ScheduleAdherence after2 = replay.Adherence();
  EXPECT_TRUE(after2.aligned);
  EXPECT_EQ(after2.alignments, 1u);
  EXPECT_EQ(after2.positions_followed, w.num_launches());
  ASSERT_EQ(log.news.size(), 1u);
  EXPECT_NE(log.news[0].find("recognised the planned step"), std::string::npos) << log.news[0];
  EXPECT_TRUE(log.problems.empty());

  // Step 3: exactly the schedule's moves, at the addresses the policy numbers name (step-local
  // allocations are the step's managed allocations, in order).
  const size_t from = replay.device_.calls.size();
  replay.Step();
  std::vector<uint64_t> local;
  for (size_t i = from; i < replay.device_.calls.size(); ++i) {
    if (replay.device_.calls[i].what == "managed") local.push_back(replay.device_.calls[i].address);
  }
  auto address = [&](const ChunkRange& r) {
    const uint64_t base = r.alloc_id <= plan.persistent
                              ? replay.Address(r.alloc_id, 0)
                              : local.at(r.alloc_id - plan.persistent - 1);
    return base + uint64_t{r.first_chunk} * kChunkBytes;
  };
  // With side streams the engine issues them one 2 MiB chunk per call (each chunk coming in
  // waits for the one going out that makes its room; residency_engine_schedule.cc).
  std::vector<std::tuple<std::string, uint64_t, uint64_t>> expected;
  for (const ScheduleEntry& e : plan.schedule) {
    auto add = [&](const std::vector<ChunkRange>& ranges, const char* what) {
      for (const ChunkRange& r : ranges) {
        for (uint32_t k = 0; k < r.num_chunks; ++k) {
          expected.emplace_back(what, address(r) + uint64_t{k} * kChunkBytes, kChunkBytes);
        }
      }
    };
    // A plan's discards and populates run as a write-back and a prefetch: a host copy the plan
    // does not see may still read or have written that data (residency_engine_schedule.cc).
    add(e.evict, "to_host");
    add(e.discard, "to_host");
    add(e.prefetch, "to_device");
    add(e.populate, "to_device");
  }
  EXPECT_FALSE(expected.empty());
  EXPECT_EQ(replay.Moves(from), expected);
  const ScheduleAdherence after3 = replay.Adherence();
  EXPECT_EQ(after3.steps_followed, 2u);
  EXPECT_EQ(after3.moves_issued, after3.moves_planned);
  EXPECT_EQ(after3.mismatches, 0u);
  EXPECT_TRUE(after3.fallback_reason.empty());
}

// A run of chunks coming in that waits for nothing more than its first chunk goes in one call (one
// cuMemPrefetchAsync, which the driver migrates in order): the 4 MiB activation, fresh each step on
// a device with room for everything, comes in whole, not as two 2 MiB calls.
TEST(PlannedPolicy, ARunOfIncomingChunksThatWaitsForNothingMoreIsOneCall) {
  const Workload w = SmallStep(4 * kMiB);
  const uint64_t budget = 64 * kMiB;
  const PolicyFile plan = Plan(w, budget);
  Replay replay(w, MakePlannedPolicy(plan, "small.toml", budget, nullptr), budget);
  const size_t from = replay.ThirdStepFollowed();
  uint64_t x = 0;  // the activation: the step's first managed allocation
  for (size_t i = from; i < replay.device_.calls.size() && x == 0; ++i) {
    if (replay.device_.calls[i].what == "managed") x = replay.device_.calls[i].address;
  }
  ASSERT_NE(x, 0u);
  std::vector<uint64_t> sizes;  // of the calls bringing in the activation
  for (const auto& [what, address, bytes] : replay.Moves(from)) {
    if (what == "to_device" && address >= x && address < x + 4 * kMiB) sizes.push_back(bytes);
  }
  EXPECT_EQ(sizes, std::vector<uint64_t>{4 * kMiB});
}

// The schedule's moves are pipelined chunk by chunk, as the simulator prices them: evictions go on
// the evict stream (one chunk per call, an event after each), and at a position that sends out
// several chunks the first chunk coming in waits for older room (a free's discard, an earlier
// eviction) or the first chunk going out, never for the last; the launch waits only for the
// side-stream events after prefetches of what it uses.
TEST(PlannedPolicy, IncomingChunksWaitOnlyForTheEvictionThatMakesTheirRoom) {
  const Workload w = SmallStep();
  const uint64_t budget = 6 * kMiB;
  Replay replay(w, MakePlannedPolicy(Plan(w, budget), "small.toml", budget, nullptr), budget);
  const size_t from = replay.ThirdStepFollowed();
  const std::vector<DeviceCall> streams = replay.device_.Calls("stream");
  ASSERT_EQ(streams.size(), 2u);
  const Stream side = streams[0].stream, evict = streams[1].stream;
  std::vector<Event> after_evictions;  // events recorded after each chunk sent out at a position
  std::map<Stream, Event> last_wait;
  std::set<Event> side_records;  // events recorded on the side stream (after prefetches)
  bool first_in = true;
  int pipelined = 0, launch_waits = 0;
  const std::vector<DeviceCall>& calls = replay.device_.calls;
  for (size_t i = from; i < calls.size(); ++i) {
    const DeviceCall& c = calls[i];
    if (c.what == "wait" && c.stream == evict && i > 0 && calls[i - 1].what == "record" &&
        calls[i - 1].stream == kStream && calls[i - 1].event == c.event) {
      after_evictions.clear();  // a position with evictions begins
      first_in = true;
    }
    if (c.what == "to_host") {
      EXPECT_EQ(c.bytes, kChunkBytes);
    }
    if (c.what == "record" && c.stream == evict && i > 0 && calls[i - 1].what == "to_host") {
      after_evictions.push_back(c.event);
    }
    if (c.what == "record" && c.stream == side) side_records.insert(c.event);
    if (c.what == "wait") {
      last_wait[c.stream] = c.event;
      if (c.stream == kStream && side_records.contains(c.event)) ++launch_waits;
    }
    if (c.what == "to_device" && c.stream == side && first_in && after_evictions.size() >= 2) {
      first_in = false;
      EXPECT_NE(last_wait[side], after_evictions.back()) << "call " << i;
      ++pipelined;
    }
  }
  EXPECT_GT(pipelined, 0);     // the step has such positions
  EXPECT_GT(launch_waits, 0);  // and launches that wait for a prefetch
}

// Runs three steps (the step is recognised at the end of the first and followed from the second's
// start) and returns, per step, the device calls of its launch at `position` (the calls made from
// that launch to the next, or to the step's end).
std::vector<std::vector<DeviceCall>> LaunchCalls(Replay& replay, const Workload& w,
                                                 size_t position = 0) {
  std::vector<size_t> launch_calls;  // the device call index at each launch
  replay.before_launch_ = [&] { launch_calls.push_back(replay.device_.calls.size()); };
  replay.Init();
  for (int s = 0; s < 3; ++s) replay.Step();
  replay.before_launch_ = nullptr;
  const size_t n = w.num_launches();
  std::vector<std::vector<DeviceCall>> at(3);
  EXPECT_EQ(launch_calls.size(), 3 * n);
  EXPECT_LT(position, n);
  if (launch_calls.size() != 3 * n || position >= n) return at;
  launch_calls.push_back(replay.device_.calls.size());
  for (size_t s = 0; s < 3; ++s) {
    at[s].assign(
        replay.device_.calls.begin() + static_cast<std::ptrdiff_t>(launch_calls[s * n + position]),
        replay.device_.calls.begin() +
            static_cast<std::ptrdiff_t>(launch_calls[s * n + position + 1]));
  }
  return at;
}

// The chunk addresses the calls `what` among `calls` cover.
std::set<uint64_t> AddressesOf(const std::vector<DeviceCall>& calls, std::string_view what) {
  std::set<uint64_t> out;
  for (const DeviceCall& c : calls) {
    if (c.what != what) continue;
    // A call may cover a run of chunks (consecutive prefetches that wait for nothing more go in
    // one call): each chunk it starts in.
    for (uint64_t a = c.address; a == c.address || a < c.address + c.bytes; a += kChunkBytes) {
      out.insert(a);
    }
  }
  return out;
}

// The addresses of the persistent chunks the schedule itself sends out (or, `incoming`, brings
// in) at position 0.
std::set<uint64_t> MovedAtPositionZero(const PolicyFile& plan, const Replay& replay,
                                       bool incoming) {
  std::set<uint64_t> moved;
  for (const ScheduleEntry& e : plan.schedule) {
    if (e.position != 0) continue;
    for (const auto* ranges :
         incoming ? std::vector{&e.prefetch, &e.populate} : std::vector{&e.evict}) {
      for (const ChunkRange& r : *ranges) {
        if (r.alloc_id > plan.persistent) continue;  // step-local: freed by now
        for (uint32_t k = r.first_chunk; k < r.first_chunk + r.num_chunks; ++k) {
          moved.insert(replay.Address(r.alloc_id, k));
        }
      }
    }
  }
  return moved;
}

// When following begins, the device holds what the learned policy left there: the first position
// followed sends out the persistent chunks the plan has off the device at its step's start
// (OffDeviceAtStepStart), so that the plan's moves find the room they expect; a step followed
// after that sends out only what the schedule says.
TEST(PlannedPolicy, FollowingBeginsBySendingOutWhatThePlanHasOffTheDevice) {
  const Workload w = SmallStep();
  const uint64_t budget = 6 * kMiB;
  const PolicyFile plan = Plan(w, budget);
  const std::vector<ChunkRange> off = OffDeviceAtStepStart(plan);
  ASSERT_FALSE(off.empty());
  Replay replay(w, MakePlannedPolicy(plan, "small.toml", budget, nullptr), budget);
  const std::vector<std::vector<DeviceCall>> first_calls = LaunchCalls(replay, w);
  const std::set<uint64_t> scheduled = MovedAtPositionZero(plan, replay, /*incoming=*/false);
  const std::set<uint64_t> first = AddressesOf(first_calls[1], "to_host"),
                           next = AddressesOf(first_calls[2], "to_host");
  for (const ChunkRange& r : off) {
    const uint64_t address = replay.Address(r.alloc_id, r.first_chunk);
    EXPECT_TRUE(first.contains(address))
        << "allocation " << r.alloc_id << " chunk " << r.first_chunk;
    if (!scheduled.contains(address)) {
      EXPECT_FALSE(next.contains(address)) << "allocation " << r.alloc_id;
    }
  }
  EXPECT_EQ(replay.Adherence().steps_followed, 2u);
}

// ...and then brings in the persistent chunks the plan has on the device at its step's start
// (OnDeviceAtStepStart): the schedule never prefetches them before their use, so one the learned
// policy left off the device would come back by a demand fault, into room the ledger does not know
// of (the device then evicts on its own, every step). A step followed after that brings in only
// what the schedule says. The position's evictions come first, and each chunk coming in waits for
// the room it takes (here, the newest eviction: the learned policy's room is not the plan's).
TEST(PlannedPolicy, FollowingBeginsByBringingInWhatThePlanHasOnTheDevice) {
  for (const bool idle : {false, true}) {
    SCOPED_TRACE(idle ? "with a persistent allocation the step does not use" : "all used");
    const Workload w = SmallStep(2 * kMiB, false, idle);
    const uint64_t budget = 6 * kMiB;
    const PolicyFile plan = Plan(w, budget);
    std::set<uint64_t> used;
    for (const StepEvent& e : w.step) {
      for (const ChunkRange& r : e.launch.accesses) used.insert(r.alloc_id);
    }
    std::vector<uint64_t> persistent_bytes;
    for (uint64_t id = 1; id <= plan.persistent; ++id) {
      persistent_bytes.push_back(used.contains(id) ? w.allocations[id - 1].bytes : 0);
    }
    const std::vector<ChunkRange> on = OnDeviceAtStepStart(plan, persistent_bytes);
    ASSERT_FALSE(on.empty());
    Replay replay(w, MakePlannedPolicy(plan, "small.toml", budget, nullptr), budget);
    const std::vector<std::vector<DeviceCall>> first_calls = LaunchCalls(replay, w);
    const std::set<uint64_t> scheduled = MovedAtPositionZero(plan, replay, /*incoming=*/true);
    const std::vector<DeviceCall>& first = first_calls[1];
    const std::set<uint64_t> in_first = AddressesOf(first, "to_device"),
                             in_next = AddressesOf(first_calls[2], "to_device");
    for (const ChunkRange& r : on) {
      for (uint32_t k = r.first_chunk; k < r.first_chunk + r.num_chunks; ++k) {
        const uint64_t address = replay.Address(r.alloc_id, k);
        EXPECT_TRUE(in_first.contains(address)) << "allocation " << r.alloc_id << " chunk " << k;
        if (!scheduled.contains(address)) {
          EXPECT_FALSE(in_next.contains(address)) << "allocation " << r.alloc_id << " chunk " << k;
        }
      }
    }
    // The unused one is on no device the plan models: bringing it in would fill the room the
    // plan's own moves take.
    if (idle) {
      EXPECT_FALSE(in_first.contains(replay.Address(4, 0)));
    }
    // Every chunk brought in there comes after the position's last eviction has been recorded, and
    // its stream waits for an event first.
    size_t last_out = 0, first_in = first.size();
    for (size_t i = 0; i < first.size(); ++i) {
      if (first[i].what == "to_host") last_out = i;
      if (first[i].what == "to_device") first_in = std::min(first_in, i);
    }
    ASSERT_LT(first_in, first.size());
    EXPECT_LT(last_out, first_in);
    EXPECT_TRUE(std::any_of(first.begin(), first.begin() + static_cast<std::ptrdiff_t>(first_in),
                            [&](const DeviceCall& c) {
                              return c.what == "wait" && c.stream == first[first_in].stream;
                            }));
    EXPECT_EQ(replay.Adherence().steps_followed, 2u);
    EXPECT_LE(replay.engine_.resident_estimate(), budget);
  }
}

// A schedule moves chunks, the engine's own moves whole allocations: the schedule may bring in one
// chunk of an allocation and leave the other out. The engine's count of what is on the device stays
// what its calls (and the kernels' paging) leave there, from the learned policy's first steps
// through following begun and followed: counted high, the engine would load less than fits;
// counted short, its own moves after following would fill the device past the budget, and the
// device would evict on its own (OnlinePlan.TheEnginesCountIsWhatItsCallsLeaveOnTheDevice).
TEST(PlannedPolicy, TheEnginesCountIsWhatItsCallsLeaveOnTheDevice) {
  const Workload w = SmallStep();
  const uint64_t budget = 6 * kMiB;
  const PolicyFile plan = Plan(w, budget);
  bool part = false;  // the plan moves part of an allocation
  for (const ScheduleEntry& e : plan.schedule) {
    for (const std::vector<ChunkRange>* moves : {&e.evict, &e.prefetch}) {
      for (const ChunkRange& r : *moves) {
        part = part || uint64_t{r.num_chunks} * kChunkBytes < w.allocation(r.alloc_id).bytes;
      }
    }
  }
  ASSERT_TRUE(part) << FormatPolicyFile(plan);
  Replay replay(w, MakePlannedPolicy(plan, "part.toml", budget, nullptr), budget);
  replay.after_launch_ = [&replay] {
    EXPECT_EQ(replay.engine_.resident_estimate(), replay.OnDeviceByCalls())
        << "after launch " << replay.launches_;
  };
  replay.Init();
  for (int i = 0; i < 4; ++i) replay.Step();
  EXPECT_EQ(replay.Adherence().steps_followed, 3u);
}

// A schedule's evict_absent entries (what is over the budget right after a launch larger than the
// device) are sent out at their position like evictions, and followed as the plan says.
TEST(PlannedPolicy, EvictAbsentEntriesAreSentOutAtTheirPosition) {
  const Workload w = SmallStep();
  const uint64_t budget = 6 * kMiB;
  PolicyFile plan = Plan(w, budget);
  ScheduleEntry* moved = nullptr;
  for (ScheduleEntry& e : plan.schedule) {
    if (e.position != 0 && !e.evict.empty()) {
      moved = &e;
      break;
    }
  }
  ASSERT_NE(moved, nullptr) << FormatPolicyFile(plan);
  moved->evict_absent = std::exchange(moved->evict, {});
  const uint32_t position = moved->position;
  const std::vector<ChunkRange> absent = moved->evict_absent;
  Replay replay(w, MakePlannedPolicy(plan, "absent.toml", budget, nullptr), budget);
  // The calls made for the launch at `position` of the last step (followed).
  const std::vector<DeviceCall> at = LaunchCalls(replay, w, position)[2];
  const std::set<uint64_t> out = AddressesOf(at, "to_host");
  for (const ChunkRange& r : absent) {
    if (r.alloc_id > plan.persistent) continue;  // step-local: its address is the step's
    EXPECT_TRUE(out.contains(replay.Address(r.alloc_id, r.first_chunk))) << r.alloc_id;
  }
  EXPECT_FALSE(out.empty());
  const ScheduleAdherence a = replay.Adherence();
  EXPECT_EQ(a.steps_followed, 2u);
  EXPECT_EQ(a.moves_issued, a.moves_planned);
  EXPECT_LE(replay.engine_.resident_estimate(), budget);
}

// A schedule that leaves a launch's data absent (here: one prefetch taken out of it) is no reason
// for the device to page it in behind the engine's count: the engine loads it before the kernel,
// on the launch's stream, keeps its count within the budget, and says how much it loaded so.
TEST(PlannedPolicy, DataTheScheduleLeavesAbsentIsLoadedBeforeTheLaunch) {
  const Workload w = SmallStep();
  const uint64_t budget = 6 * kMiB;
  PolicyFile plan = Plan(w, budget);
  ScheduleEntry* taken = nullptr;
  for (ScheduleEntry& e : plan.schedule) {
    for (const ChunkRange& r : e.prefetch) {
      if (r.alloc_id <= plan.persistent) taken = &e;
    }
    if (taken != nullptr) break;
  }
  ASSERT_NE(taken, nullptr) << FormatPolicyFile(plan);
  ChunkRange missing;
  for (const ChunkRange& r : taken->prefetch) {
    if (r.alloc_id <= plan.persistent) missing = r;
  }
  std::erase(taken->prefetch, missing);
  // The first launch at or after the taken prefetch's position that uses the chunk.
  uint32_t use = 0, position = 0;
  bool found = false;
  for (const StepEvent& e : w.step) {
    if (e.kind != StepEvent::Kind::kLaunch) continue;
    for (const ChunkRange& r : e.launch.accesses) {
      const bool covers = r.alloc_id == missing.alloc_id && r.first_chunk <= missing.first_chunk &&
                          missing.first_chunk < r.first_chunk + r.num_chunks;
      if (!found && covers && position >= taken->position) use = position, found = true;
    }
    ++position;
  }
  ASSERT_TRUE(found);
  Replay replay(w, MakePlannedPolicy(plan, "gap.toml", budget, nullptr), budget);
  const std::vector<DeviceCall> at = LaunchCalls(replay, w, use)[2];
  const uint64_t address = replay.Address(missing.alloc_id, missing.first_chunk);
  EXPECT_TRUE(std::any_of(at.begin(), at.end(),
                          [&](const DeviceCall& c) {
                            return c.what == "to_device" && c.stream == kStream &&
                                   c.address <= address && address < c.address + c.bytes;
                          }))
      << "launch " << use << " brings in allocation " << missing.alloc_id << " itself";
  const ScheduleAdherence a = replay.Adherence();
  EXPECT_EQ(a.steps_followed, 2u);
  EXPECT_GT(a.unscheduled_load_bytes, 0u);
  EXPECT_LE(replay.engine_.resident_estimate(), budget);
}

// The room ledger and the schedule take an order event half the ring (4096 events) older than the
// newest as complete. While the device has not completed it, the host waits for it before
// recording a newer one (a device far behind the host would otherwise take room that is not free
// yet, and fill past its budget); once it has completed, the host never waits.
TEST(PlannedPolicy, TheHostWaitsForAnOrderEventHalfTheRingOlderThatHasNotCompleted) {
  const Workload w = SmallStep();
  const uint64_t budget = 6 * kMiB;
  for (const bool complete : {false, true}) {
    SCOPED_TRACE(complete ? "events complete" : "events pending");
    Replay replay(w, MakePlannedPolicy(Plan(w, budget), "small.toml", budget, nullptr), budget);
    replay.device_.events_complete = complete;
    replay.Init();
    std::set<Event> recorded;
    int syncs = 0, records = 0;
    for (int step = 0; step < 1200; ++step) replay.Step();
    const std::vector<DeviceCall>& calls = replay.device_.calls;
    for (size_t i = 0; i < calls.size(); ++i) {
      if (calls[i].what == "record") {
        recorded.insert(calls[i].event);
        ++records;
      }
      if (calls[i].what != "sync") continue;
      ++syncs;
      EXPECT_TRUE(recorded.contains(calls[i].event)) << "call " << i;  // one recorded before
      ASSERT_LT(i + 1, calls.size());
      EXPECT_EQ(calls[i + 1].what, "record") << "call " << i;  // then the newer one
    }
    ASSERT_GT(records, 8192);  // the ring has come round
    if (complete) {
      EXPECT_EQ(syncs, 0);
    } else {
      EXPECT_GT(syncs, 0);
    }
  }
}

// A position that sends out two 2 MiB chunks and brings in three allocations of 64 KiB: the room
// ledger counts bytes, so the three take their 192 KiB of the room the first eviction made and
// none waits for the second (with a 2 MiB slot each, the second and third waited for it).
TEST(PlannedPolicy, SmallIncomingAllocationsTakeOnlyTheirBytesOfTheRoom) {
  StepBuilder s;
  s.w.name = "small-in";
  const uint64_t a = s.Add(2 * kMiB, true), b = s.Add(2 * kMiB, true);
  std::vector<uint64_t> small;
  for (int i = 0; i < 3; ++i) small.push_back(s.Add(64 * 1024, true));
  s.Launch({{a, 0, 1}, {b, 0, 1}});
  s.Launch({{small[0], 0, 1}, {small[1], 0, 1}, {small[2], 0, 1}});
  s.Launch({{a, 0, 1}, {b, 0, 1}});
  const uint64_t budget = 64 * kMiB;
  PolicyFile plan = Plan(s.w, budget);
  plan.schedule = {ScheduleEntry{1, {{a, 0, 1}, {b, 0, 1}}, {}, {}, {}},
                   ScheduleEntry{2, {}, {}, {{a, 0, 1}, {b, 0, 1}}, {}}};
  plan.schedule[0].prefetch = {{small[0], 0, 1}, {small[1], 0, 1}, {small[2], 0, 1}};
  Replay replay(s.w, MakePlannedPolicy(plan, "small-in.toml", budget, nullptr), budget);
  const size_t from = replay.ThirdStepFollowed();
  const std::vector<DeviceCall> streams = replay.device_.Calls("stream");
  ASSERT_EQ(streams.size(), 2u);
  const Stream side = streams[0].stream, evict = streams[1].stream;
  const std::vector<DeviceCall>& calls = replay.device_.calls;
  std::vector<Event> after_evictions;  // the events recorded after A's and B's write-backs
  // What the side stream waited for up to each small one's prefetch (since the one before).
  std::vector<std::set<Event>> waited;
  std::set<Event> side_waits;
  for (size_t i = from; i < calls.size(); ++i) {
    const DeviceCall& c = calls[i];
    if (c.what == "record" && c.stream == evict && calls[i - 1].what == "to_host") {
      after_evictions.push_back(c.event);
    }
    if (c.what == "wait" && c.stream == side) side_waits.insert(c.event);
    if (c.what == "to_device" && c.stream == side) {
      if (c.bytes == 64 * 1024) waited.push_back(side_waits);
      side_waits.clear();
    }
  }
  ASSERT_EQ(after_evictions.size(), 2u);
  ASSERT_EQ(waited.size(), 3u);
  EXPECT_TRUE(waited[0].contains(after_evictions[0]));
  for (const std::set<Event>& w : waited) EXPECT_FALSE(w.contains(after_evictions[1]));
}

// Room the learned policy made before the schedule is followed may have been taken since by what
// the engine does not see (demand faults): when following begins with the device full, a chunk
// the schedule brings in never waits for a room event from before, only for room the schedule
// made.
TEST(PlannedPolicy, ScheduledChunksDoNotTakeRoomMadeBeforeFollowing) {
  // y is freed after the step's last launch: its room is in the ledger when the next step begins.
  const Workload w = SmallStep(2 * kMiB, /*free_y_last=*/true);
  const uint64_t budget = 6 * kMiB;
  Replay replay(w, MakePlannedPolicy(Plan(w, budget), "small.toml", budget, nullptr), budget);
  replay.Init();
  replay.Step();  // learned; the step is recognised at its end
  replay.device_.free_bytes = 0;
  const size_t followed = replay.device_.calls.size();
  replay.Step();
  EXPECT_EQ(replay.Adherence().steps_followed, 1u);
  const std::vector<DeviceCall>& calls = replay.device_.calls;
  std::set<Event> before;  // events last recorded before following began
  for (size_t i = 0; i < followed; ++i) {
    if (calls[i].what == "record") before.insert(calls[i].event);
  }
  ASSERT_FALSE(before.empty());
  int incoming = 0;
  for (size_t i = followed; i < calls.size(); ++i) {
    const DeviceCall& c = calls[i];
    if (c.what == "record") before.erase(c.event);
    if (c.what == "wait") {
      EXPECT_FALSE(before.contains(c.event)) << "call " << i;
    }
    if (c.what == "to_device") ++incoming;
  }
  EXPECT_GT(incoming, 0);
}

// When following begins the engine asks the device's free memory (the room ledger keeps at most
// that), with its lock released: the fake device fails any call made under the engine's lock.
TEST(PlannedPolicy, FollowingBeginsAsksTheFreeMemoryWithoutTheEngineLock) {
  const Workload w = SmallStep(2 * kMiB, /*free_y_last=*/true);
  const uint64_t budget = 6 * kMiB;
  Replay replay(w, MakePlannedPolicy(Plan(w, budget), "small.toml", budget, nullptr), budget);
  replay.Init();
  replay.Step();  // learned; the step is recognised at its end
  EXPECT_EQ(replay.device_.memory_infos, 0);
  replay.Step();
  EXPECT_EQ(replay.Adherence().steps_followed, 1u);
  EXPECT_EQ(replay.device_.memory_infos, 1);
  EXPECT_EQ(replay.device_.calls_under_engine_lock, 0);
}

// A kernel launched on another stream after a chunk's last known use may still read it through a
// pointer in device memory, so a scheduled eviction waits for every stream that launched after
// the victim's newest use: A is used at launch 0 on kStream, launch 1 runs on another stream, and
// the plan evicts A before launch 2 (one launch after its last use) to make room for C. With side
// streams the eviction goes on the evict stream, without them on the launch stream: either way
// after a wait for an event recorded on the other stream.
void ExpectEvictionWaitsForTheOtherStream(const EngineOptions& options, Stream const other) {
  StepBuilder s;
  s.w.name = "two-streams";
  const uint64_t a = s.Add(2 * kMiB, true), b = s.Add(2 * kMiB, true), c = s.Add(2 * kMiB, true);
  s.Launch({{a, 0, 1}});
  s.Launch({{b, 0, 1}});
  s.Launch({{c, 0, 1}});
  s.Launch({{b, 0, 1}});
  s.Launch({{a, 0, 1}});
  const uint64_t budget = 4 * kMiB;
  const PolicyFile plan = Plan(s.w, budget);
  bool a_evicted_before_2 = false;
  for (const ScheduleEntry& e : plan.schedule) {
    for (const ChunkRange& r : e.evict) a_evicted_before_2 |= r.alloc_id == a && e.position == 2;
  }
  ASSERT_TRUE(a_evicted_before_2) << FormatPolicyFile(plan);
  Replay replay(s.w, MakePlannedPolicy(plan, "two.toml", budget, nullptr), budget, options);
  replay.stream_of_launch_ = [other](uint64_t position) { return position == 1 ? other : kStream; };
  const size_t from = replay.ThirdStepFollowed();
  const std::vector<DeviceCall>& calls = replay.device_.calls;
  std::set<Event> recorded_on_other;
  std::map<Stream, bool> waited;  // a stream waited for an event recorded on `other`
  bool evicted = false;
  for (size_t i = from; i < calls.size() && !evicted; ++i) {
    const DeviceCall& call = calls[i];
    if (call.what == "record" && call.stream == other) recorded_on_other.insert(call.event);
    if (call.what == "wait" && recorded_on_other.contains(call.event)) waited[call.stream] = true;
    if (call.what == "to_host" && call.address == replay.Address(a, 0)) {
      evicted = true;
      EXPECT_NE(call.stream, other);
      EXPECT_TRUE(waited[call.stream])
          << "A went out without waiting for the other stream's launch";
    }
  }
  EXPECT_TRUE(evicted);
}

Stream const kOtherStream = reinterpret_cast<Stream>(0x7);

TEST(PlannedPolicy, EvictionWaitsForStreamsThatLaunchedAfterTheVictimsLastUse) {
  ExpectEvictionWaitsForTheOtherStream(EngineOptions{}, kOtherStream);
}

// The legacy default stream (null; PyTorch's default stream) is a stream like any other.
TEST(PlannedPolicy, EvictionWaitsForTheLegacyDefaultStream) {
  ExpectEvictionWaitsForTheOtherStream(EngineOptions{}, nullptr);
}

// SPILLWAY_LOOKAHEAD=0, or side streams that cannot be made: the moves go on the launch stream,
// still ordered against the job's other streams (train_like's three streams faulted 45-109 times
// a step without this).
TEST(PlannedPolicy, WithoutSideStreamsAnEvictionStillWaitsForTheOtherStreams) {
  ExpectEvictionWaitsForTheOtherStream(EngineOptions{.lookahead_launches = 0}, kOtherStream);
}

// Without a side stream (SPILLWAY_LOOKAHEAD=0) the schedule's moves go on the launch stream.
TEST(PlannedPolicy, WithoutLookaheadMovesGoOnTheLaunchStream) {
  const Workload w = SmallStep();
  const uint64_t budget = 6 * kMiB;
  Replay replay(w, MakePlannedPolicy(Plan(w, budget), "small.toml", budget, nullptr), budget,
                EngineOptions{.lookahead_launches = 0});
  replay.Init();
  for (int i = 0; i < 3; ++i) replay.Step();
  EXPECT_EQ(replay.Adherence().steps_followed, 2u);
  EXPECT_GT(replay.Adherence().moves_issued, 0u);
  EXPECT_TRUE(replay.device_.Calls("stream").empty());
  for (const DeviceCall& call : replay.device_.calls) {
    if (call.what == "to_device" || call.what == "to_host" || call.what == "populate") {
      EXPECT_EQ(call.stream, kStream) << call.what;
    }
  }
}

// On a synthetic training step: the engine's bytes per followed step are the simulator's.
TEST(PlannedPolicy, BytesPerStepAreTheSimulatorsPrediction) {
  absl::StatusOr<Workload> w = MakeSyntheticWorkload("cnn-small");
  ASSERT_TRUE(w.ok());
  const uint64_t budget = w->peak_live_bytes() / 2;
  const PolicyFile plan = Plan(*w, budget);
  ASSERT_NE(plan.step_signature, 0u);
  Replay replay(*w, MakePlannedPolicy(plan, "cnn.policy.toml", budget, nullptr), budget);
  replay.Init();
  replay.Step();
  replay.Step();
  const ScheduleAdherence before = replay.Adherence();
  replay.Step();
  const ScheduleAdherence after = replay.Adherence();
  ASSERT_EQ(after.steps_followed, before.steps_followed + 1);
  SimOptions options;
  options.device_memory = budget;
  const SimResult predicted = SimulatePlanned(*w, plan, options);
  EXPECT_EQ(predicted.demand_faults, 0u);
  EXPECT_EQ(after.prefetch_bytes - before.prefetch_bytes, predicted.h2d_bytes);
  // Discards are written back (a copy the plan does not see may read them), and priced so.
  EXPECT_EQ(after.evict_bytes - before.evict_bytes + after.discard_bytes - before.discard_bytes,
            predicted.d2h_bytes);
  EXPECT_EQ(after.moves_issued, after.moves_planned);
}

// The learned policy's moves for the same replay, to compare fallbacks with.
std::vector<std::tuple<std::string, uint64_t, uint64_t>> LearnedMoves(const Workload& w,
                                                                      uint64_t budget, int steps) {
  Replay replay(w, MakeLearnedPolicy(), budget);
  replay.Init();
  for (int i = 0; i < steps; ++i) replay.Step();
  return replay.Moves();
}

void ExpectLearnedFallback(const Workload& w, std::unique_ptr<EvictionPolicy> policy,
                           uint64_t budget, int steps) {
  Replay replay(w, std::move(policy), budget);
  replay.Init();
  for (int i = 0; i < steps; ++i) replay.Step();
  EXPECT_EQ(replay.Moves(), LearnedMoves(w, budget, steps));
  EXPECT_FALSE(replay.Adherence().aligned);
  EXPECT_EQ(replay.Adherence().positions_followed, 0u);
}

TEST(PlannedPolicy, MissingFileIsOneLineAndLearned) {
  const Workload w = SmallStep();
  Logged log;
  std::unique_ptr<EvictionPolicy> policy =
      LoadPlannedPolicy("/nonexistent/x.policy.toml", 6 * kMiB, log.Sink());
  EXPECT_EQ(policy->name(), "learned");
  ASSERT_EQ(log.problems.size(), 1u);
  EXPECT_EQ(log.problems[0], "/nonexistent/x.policy.toml: cannot open the policy file");
  EXPECT_EQ(policy->schedule_source()->adherence()->fallback_reason, log.problems[0]);
  ExpectLearnedFallback(w, std::move(policy), 6 * kMiB, 4);
  EXPECT_EQ(log.problems.size(), 1u);
}

TEST(PlannedPolicy, MalformedFileIsOneLineWithFileAndLine) {
  const Workload w = SmallStep();
  const std::string path =
      WriteTemp("bad.policy.toml", "version = 1\n[budget]\ndevice_memory = \"6MiB\"\nspeed = 2\n");
  Logged log;
  std::unique_ptr<EvictionPolicy> policy = LoadPlannedPolicy(path, 6 * kMiB, log.Sink());
  ASSERT_EQ(log.problems.size(), 1u);
  EXPECT_EQ(log.problems[0], path + ":4: unknown key 'budget.speed' (known: device_memory)")
      << log.problems[0];
  ExpectLearnedFallback(w, std::move(policy), 6 * kMiB, 4);
  std::remove(path.c_str());
}

TEST(PlannedPolicy, RulesByCallSiteOrModuleAreSaidToMatchNothingInARunWithoutStacks) {
  const Workload w = SmallStep();
  PolicyFile plan = Plan(w, 6 * kMiB);
  const std::string text = FormatPolicyFile(plan) +
                           "[[rule]]\ncall_site = \"9c1d2e3f4a5b6c7d\"\naction = \"host\"\n"
                           "[[rule]]\nmodule = \"libnccl.so.2\"\naction = \"never\"\n"
                           "[[rule]]\nmin_size = \"1MiB\"\naction = \"keep\"\n";
  const std::string path = WriteTemp("sites.policy.toml", text);
  absl::StatusOr<PolicyFile> file = ReadPolicyFile(path);
  ASSERT_TRUE(file.ok()) << file.status();
  ASSERT_GE(file->rules.size(), 3u);
  const PolicyRule& by_site = file->rules[file->rules.size() - 3];
  const PolicyRule& by_module = file->rules[file->rules.size() - 2];
  Logged log;
  Replay replay(w, LoadPlannedPolicy(path, 6 * kMiB, log.Sink()), 6 * kMiB);
  ASSERT_EQ(log.problems.size(), 2u);
  EXPECT_EQ(log.problems[0], path + ":" + std::to_string(by_site.line) +
                                 ": this rule matches by call_site, but this run takes no call "
                                 "stacks (libunwind.so.8 could not be loaded); it matches "
                                 "nothing here");
  EXPECT_NE(
      log.problems[1].find(":" + std::to_string(by_module.line) + ": this rule matches by module,"),
      std::string::npos)
      << log.problems[1];
  // Only said: the file is still followed.
  replay.Init();
  for (int i = 0; i < 3; ++i) replay.Step();
  EXPECT_EQ(log.problems.size(), 2u);
  EXPECT_EQ(replay.Adherence().steps_followed, 2u);
  std::remove(path.c_str());
}

TEST(PlannedPolicy, ValidFileReadFromDiskIsFollowed) {
  const Workload w = SmallStep();
  const std::string path = WriteTemp("good.policy.toml", FormatPolicyFile(Plan(w, 6 * kMiB)));
  Logged log;
  Replay replay(w, LoadPlannedPolicy(path, 6 * kMiB, log.Sink()), 6 * kMiB);
  replay.Init();
  for (int i = 0; i < 3; ++i) replay.Step();
  EXPECT_TRUE(log.problems.empty());
  EXPECT_EQ(replay.Adherence().steps_followed, 2u);
  EXPECT_EQ(replay.Adherence().path, path);
  std::remove(path.c_str());
}

TEST(PlannedPolicy, PlannedForMoreMemoryIsOneLineAndLearned) {
  const Workload w = SmallStep();
  Logged log;
  std::unique_ptr<EvictionPolicy> policy =
      MakePlannedPolicy(Plan(w, 8 * kMiB), "p.toml", 6 * kMiB, log.Sink());
  ASSERT_EQ(log.problems.size(), 1u);
  EXPECT_EQ(log.problems[0],
            "p.toml: planned for 8388608 bytes of device memory, the engine has 6291456");
  ExpectLearnedFallback(w, std::move(policy), 6 * kMiB, 4);
}

// A step longer than the engine follows (a count in the file that would size its hash's ring at
// 8 TiB) is one line and the learned policy; nothing is allocated for it.
TEST(PlannedPolicy, AStepLongerThanTheEngineFollowsIsOneLineAndLearned) {
  const Workload w = SmallStep();
  PolicyFile plan = Plan(w, 6 * kMiB);
  plan.step_events = uint64_t{1} << 40;
  Logged log;
  std::unique_ptr<EvictionPolicy> policy =
      MakePlannedPolicy(plan, "long.toml", 6 * kMiB, log.Sink());
  ASSERT_EQ(log.problems.size(), 1u);
  EXPECT_EQ(log.problems[0],
            "long.toml: the policy's step has 1099511627776 events, more than the engine follows "
            "(4194304)");
  ExpectLearnedFallback(w, std::move(policy), 6 * kMiB, 4);
}

// A file that spillway simulate refuses for this job is refused by the engine too, by the same
// check (CheckPolicyMatches), once its step is recognised: one line with the file's line, in the
// log and the summary's problems, and the learned policy decides. Each edit below keeps the
// step signature, so the step is recognised as the file's.
TEST(PlannedPolicy, AFileSimulateRefusesIsRefusedWithItsLineWhenTheStepIsRecognised) {
  const Workload w = SmallStep();
  const PolicyFile plan = Plan(w, 6 * kMiB);
  ASSERT_FALSE(plan.schedule.empty());
  const std::vector<std::pair<std::string, std::function<void(PolicyFile*)>>> edits = {
      {"launches", [&](PolicyFile* p) { p->launches = w.num_launches() + 1; }},
      {"allocations", [](PolicyFile* p) { p->allocations = uint64_t{1} << 40; }},
      {"position past the step",
       [&](PolicyFile* p) {
         ScheduleEntry past;
         past.position = static_cast<uint32_t>(w.num_launches() + 5);
         past.prefetch.push_back(ChunkRange{1, 0, 1});
         p->schedule.push_back(past);
       }},
      {"allocation not in the job",
       [&](PolicyFile* p) {
         p->schedule.back().prefetch.push_back(ChunkRange{w.allocations.size() + 1, 0, 1});
       }},
      {"chunks past the allocation",
       [](PolicyFile* p) {
         p->schedule.back().prefetch.push_back(ChunkRange{1, 0, 100});
       }},
  };
  for (const auto& [what, edit] : edits) {
    SCOPED_TRACE(what);
    PolicyFile bad = plan;
    edit(&bad);
    const std::string path = WriteTemp("edited.policy.toml", FormatPolicyFile(bad));
    absl::StatusOr<PolicyFile> read = ReadPolicyFile(path);
    ASSERT_TRUE(read.ok()) << read.status();
    const absl::Status refused = CheckPolicyMatches(*read, path, w);
    ASSERT_FALSE(refused.ok());
    EXPECT_EQ(refused.message().substr(0, path.size() + 1), path + ":");
    EXPECT_NE(refused.message()[path.size() + 1], ' ') << "no line: " << refused.message();
    Logged log;
    std::unique_ptr<EvictionPolicy> policy = LoadPlannedPolicy(path, 6 * kMiB, log.Sink());
    ExpectLearnedFallback(w, std::move(policy), 6 * kMiB, 4);
    ASSERT_EQ(log.problems.size(), 1u);
    EXPECT_EQ(log.problems[0], absl::StrCat(refused.message(), "; the learned policy decides"));
    std::remove(path.c_str());
  }
  // The file as planned is followed.
  Replay replay(w, MakePlannedPolicy(plan, "small.toml", 6 * kMiB, nullptr), 6 * kMiB);
  replay.Init();
  for (int i = 0; i < 3; ++i) replay.Step();
  EXPECT_EQ(replay.Adherence().steps_followed, 2u);
}

TEST(PlannedPolicy, AnotherJobsPolicyIsNeverFollowed) {
  const Workload w = SmallStep();
  // Planned for a step whose first activation is twice as big: its signature never matches.
  Logged log;
  std::unique_ptr<EvictionPolicy> policy =
      MakePlannedPolicy(Plan(SmallStep(4 * kMiB), 6 * kMiB), "other.toml", 6 * kMiB, log.Sink());
  ExpectLearnedFallback(w, std::move(policy), 6 * kMiB, 120);
  ASSERT_EQ(log.problems.size(), 1u);
  EXPECT_NE(log.problems[0].find("other.toml: no step of the job has matched"), std::string::npos)
      << log.problems[0];
  EXPECT_TRUE(log.news.empty());
}

TEST(PlannedPolicy, LeavingTheStepFallsBackToLearnedWithOneLine) {
  const Workload w = SmallStep();
  const Workload other = SmallStep(4 * kMiB);  // the same persistent allocations
  const uint64_t budget = 6 * kMiB;
  Logged log;
  Replay replay(w, MakePlannedPolicy(Plan(w, budget), "small.toml", budget, log.Sink()), budget);
  replay.Init();
  for (int i = 0; i < 3; ++i) replay.Step();
  ASSERT_TRUE(replay.Adherence().aligned);
  EXPECT_TRUE(log.problems.empty());
  // The job changes its step (a bigger activation): one line at the step's end, then the
  // learned policy decides every launch.
  replay.Step(&other);
  const ScheduleAdherence left = replay.Adherence();
  EXPECT_FALSE(left.aligned);
  EXPECT_EQ(left.mismatches, 1u);
  ASSERT_EQ(log.problems.size(), 1u);
  EXPECT_NE(log.problems[0].find("small.toml: the step's events do not match the policy's step "
                                 "signature"),
            std::string::npos)
      << log.problems[0];
  EXPECT_EQ(left.fallback_reason, log.problems[0]);
  for (int i = 0; i < 3; ++i) replay.Step(&other);
  EXPECT_EQ(replay.Adherence().positions_followed, left.positions_followed);
  EXPECT_EQ(log.problems.size(), 1u);
  // Back to the planned step: recognised again after one step.
  replay.Step();
  replay.Step();
  EXPECT_TRUE(replay.Adherence().aligned);
  EXPECT_EQ(replay.Adherence().alignments, 2u);
}

TEST(PlannedPolicy, KeepRuleAllocationsAreNoVictimsOfTheLearnedPolicy) {
  const Workload w = SmallStep();
  PolicyFile file;  // rules only: no schedule, no signature (never followed)
  file.budget_bytes = 4 * kMiB;
  PolicyRule keep;
  keep.min_bytes = keep.max_bytes = 4 * kMiB;  // the two-chunk persistent allocation
  keep.action = RuleAction::kKeep;
  file.rules.push_back(keep);
  Replay replay(w, MakePlannedPolicy(file, "rules.toml", 6 * kMiB, nullptr), 6 * kMiB);
  replay.Init();
  for (int i = 0; i < 3; ++i) replay.Step();
  const uint64_t kept = replay.Address(1, 0);
  for (const auto& [what, address, bytes] : replay.Moves()) {
    if (what == "to_host") {
      EXPECT_NE(address, kept);
    }
  }
  EXPECT_FALSE(replay.Moves().empty());
}

// ---- Host placement (`host` rules): policy/engine/residency_engine_host.cc ----

// Persistent A (4 MiB) and B (2 MiB); per step X (6 MiB, the one rules place) and Y (2 MiB).
Workload HostStep() {
  StepBuilder s;
  s.w.name = "host-step";
  const uint64_t a = s.Add(4 * kMiB, true), b = s.Add(2 * kMiB, true);
  const uint64_t x = s.Add(6 * kMiB, false), y = s.Add(2 * kMiB, false);
  s.Event(x, StepEvent::Kind::kAlloc);
  s.Launch({{a, 0, 2}, {x, 0, 3}});
  s.Event(y, StepEvent::Kind::kAlloc);
  s.Launch({{b, 0, 1}, {x, 0, 3}, {y, 0, 1}});
  s.Event(x, StepEvent::Kind::kFree);
  s.Launch({{a, 0, 2}, {y, 0, 1}});
  s.Event(y, StepEvent::Kind::kFree);
  s.Launch({{b, 0, 1}, {a, 1, 1}});
  return s.w;
}

PolicyFile PlanWithRule(const Workload& w, uint64_t budget, const PolicyRule& rule) {
  PlanOptions options;
  options.sim.device_memory = budget;
  options.place_on_host = false;
  options.rules.push_back(rule);
  absl::StatusOr<PolicyFile> plan = PlanPolicy(w, options);
  EXPECT_TRUE(plan.ok()) << plan.status();
  return plan.ok() ? *plan : PolicyFile{};
}

PolicyRule SizeRule(uint64_t bytes, RuleAction action) {
  PolicyRule rule;
  rule.min_bytes = rule.max_bytes = bytes;
  rule.action = action;
  return rule;
}

// The addresses of the managed allocations of `bytes` the replay made, in order.
std::vector<uint64_t> AllocationsOf(const FakeDevice& device, uint64_t bytes) {
  std::vector<uint64_t> out;
  for (const DeviceCall& c : device.Calls("managed")) {
    if (c.bytes == bytes) out.push_back(c.address);
  }
  return out;
}

// Device calls of kind `what` that touch [base, base + bytes).
size_t CallsOn(const Replay& replay, const std::string& what, uint64_t base, uint64_t bytes) {
  size_t n = 0;
  for (const auto& [kind, address, length] : replay.Moves()) {
    if (kind == what && address < base + bytes && base < address + length) ++n;
  }
  return n;
}

TEST(HostPlacement, HostRuleAllocationIsAdvisedOnceNeverMovedAndOutOfTheBudget) {
  const Workload w = HostStep();
  const uint64_t budget = 6 * kMiB;
  const PolicyFile plan = PlanWithRule(w, budget, SizeRule(6 * kMiB, RuleAction::kHost));
  ASSERT_NE(plan.step_signature, 0u);
  Logged log;
  Replay replay(w, MakePlannedPolicy(plan, "host.policy.toml", budget, log.Sink()), budget);
  replay.Init();
  replay.Step();
  replay.Step();
  const ScheduleAdherence before = replay.Adherence();
  replay.Step();
  const ScheduleAdherence after = replay.Adherence();
  replay.Step();
  EXPECT_TRUE(log.problems.empty());
  // Every X (one per step, a size rule places it from its allocation on) is advised exactly once,
  // before any launch, and never moved.
  const std::vector<uint64_t> xs = AllocationsOf(replay.device_, 6 * kMiB);
  ASSERT_EQ(xs.size(), 4u);
  const std::vector<DeviceCall> host = replay.device_.Calls("host");
  ASSERT_EQ(host.size(), xs.size());
  for (size_t i = 0; i < xs.size(); ++i) {
    EXPECT_EQ(host[i].address, xs[i]);
    EXPECT_EQ(host[i].bytes, 6 * kMiB);
    for (const char* what : {"to_device", "to_host", "populate", "discard"}) {
      EXPECT_EQ(CallsOn(replay, what, xs[i], 6 * kMiB), 0u) << what << " of X " << i;
    }
  }
  EXPECT_EQ(after.host_placements, 3u);  // counted once per allocation: the X's of steps 1..3
  EXPECT_EQ(after.host_bytes, 3 * 6 * kMiB);
  EXPECT_EQ(after.host_failures, 0u);
  // The budget: X takes none of it, so what the engine holds (A, B, Y at most) fits.
  EXPECT_LE(replay.engine_.resident_estimate(), budget);
  // And a followed step moves what the simulator predicts for the same file, with X remote.
  SimOptions options;
  options.device_memory = budget;
  const SimResult predicted = SimulatePlanned(w, plan, options);
  EXPECT_GT(predicted.remote_bytes, 0u);
  EXPECT_EQ(predicted.demand_faults, 0u);
  EXPECT_EQ(after.prefetch_bytes - before.prefetch_bytes, predicted.h2d_bytes);
  // Discards are written back (a copy the plan does not see may read them), and priced so.
  EXPECT_EQ(after.evict_bytes - before.evict_bytes + after.discard_bytes - before.discard_bytes,
            predicted.d2h_bytes);
  EXPECT_EQ(after.moves_issued, after.moves_planned);
}

// While a stream capture is in progress the shim asks the engine not to place an allocation on the
// host at its cuMemAlloc (that would use the legacy stream, which a capture of a blocking stream
// makes unusable): the placements a host rule calls for are then made at the next launch, on its
// stream, so every X is still placed once, and the step's moves are the same.
TEST(HostPlacement, PlacementsAnAllocationDefersAreMadeAtTheNextLaunch) {
  const Workload w = HostStep();
  const uint64_t budget = 6 * kMiB;
  const PolicyFile plan = PlanWithRule(w, budget, SizeRule(6 * kMiB, RuleAction::kHost));
  std::vector<ScheduleAdherence> adherence;
  for (const bool place_now : {true, false}) {
    Logged log;
    Replay replay(w, MakePlannedPolicy(plan, "host.policy.toml", budget, log.Sink()), budget);
    replay.place_now_ = place_now;
    replay.Init();
    for (int step = 0; step < 4; ++step) replay.Step();
    EXPECT_TRUE(log.problems.empty());
    const std::vector<uint64_t> xs = AllocationsOf(replay.device_, 6 * kMiB);
    const std::vector<DeviceCall> host = replay.device_.Calls("host");
    ASSERT_EQ(host.size(), xs.size()) << place_now;
    for (size_t i = 0; i < xs.size(); ++i) EXPECT_EQ(host[i].address, xs[i]) << place_now;
    if (place_now) {
      EXPECT_EQ(replay.placements_at_allocation_, xs.size());
    } else {
      EXPECT_EQ(replay.placements_at_allocation_, 0u);
    }
    adherence.push_back(replay.Adherence());
  }
  EXPECT_EQ(adherence[0].host_placements, adherence[1].host_placements);
  EXPECT_EQ(adherence[0].prefetch_bytes, adherence[1].prefetch_bytes);
  EXPECT_EQ(adherence[0].evict_bytes, adherence[1].evict_bytes);
}

// Rules by call site and module match the call sites the run gives its allocations
// (Allocation::call_site, taken as interpose/allocation_sites.h does, and the modules on each
// site's stack): a host rule naming X's call site, or a module only on X's stack, places every X
// and nothing else; a module on no stack places nothing; without stacks nothing matches.
TEST(HostPlacement, RulesByCallSiteAndModuleMatchTheRunsCallSites) {
  Workload w = HostStep();
  for (WorkloadAllocation& a : w.allocations) {
    const bool x = a.bytes == 6 * kMiB;
    a.call_site = CallSiteName(x ? 0xc0ffee : 0xbeef);
    a.modules = {x ? "/opt/model/libmodel.so" : "/opt/model/libother.so",
                 "/usr/lib/libtorch_cuda.so"};
  }
  const CallSiteModules modules = [&w](uint64_t site) {
    for (const WorkloadAllocation& a : w.allocations) {
      if (a.call_site == CallSiteName(site)) return a.modules;
    }
    return std::vector<std::string>();
  };
  const uint64_t budget = 6 * kMiB;
  PolicyRule by_site, by_module, by_missing_module;
  by_site.call_site = CallSiteName(0xc0ffee);
  by_module.module = "libmodel.so";
  by_missing_module.module = "libmissing.so";
  struct Case {
    const PolicyRule* rule;
    bool stacks;
    size_t placed;  // X's placed in four steps
  };
  for (const Case& c : {Case{&by_site, true, 4}, Case{&by_module, true, 4},
                        Case{&by_missing_module, true, 0}, Case{&by_site, false, 0}}) {
    PolicyRule rule = *c.rule;
    rule.action = RuleAction::kHost;
    const PolicyFile plan = PlanWithRule(w, budget, rule);
    Logged log;
    Replay replay(w,
                  MakePlannedPolicy(plan, "sites.policy.toml", budget, log.Sink(),
                                    c.stacks ? modules : nullptr),
                  budget);
    replay.Init();
    for (int i = 0; i < 4; ++i) replay.Step();
    EXPECT_EQ(log.problems.size(), c.stacks ? 0u : 1u);
    const std::vector<DeviceCall> host = replay.device_.Calls("host");
    ASSERT_EQ(host.size(), c.placed) << rule.call_site << rule.module;
    const std::vector<uint64_t> xs = AllocationsOf(replay.device_, 6 * kMiB);
    for (size_t i = 0; i < host.size(); ++i) EXPECT_EQ(host[i].address, xs[i]);
  }
}

TEST(HostPlacement, PersistentAllocationNumberedLaterIsWrittenBackOnceThenLeftOnTheHost) {
  const Workload w = HostStep();
  const uint64_t budget = 6 * kMiB;
  PolicyRule first;  // A, by order: known once the step is recognised (the end of step 1)
  first.first_order = first.last_order = 1;
  first.action = RuleAction::kHost;
  const PolicyFile plan = PlanWithRule(w, budget, first);
  Replay replay(w, MakePlannedPolicy(plan, "host.policy.toml", budget, nullptr), budget);
  replay.Init();
  replay.Step();
  const uint64_t a = replay.Address(1, 0);
  EXPECT_GT(CallsOn(replay, "to_device", a, 4 * kMiB), 0u);  // the learned policy moved it
  for (int i = 0; i < 3; ++i) replay.Step();
  // Placed once; written back once (it was resident), and then never moved again.
  const std::vector<DeviceCall> host = replay.device_.Calls("host");
  ASSERT_EQ(host.size(), 1u);
  EXPECT_EQ(host[0].address, a);
  EXPECT_EQ(host[0].bytes, 4 * kMiB);
  size_t to_device = 0, to_host = 0;
  bool placed = false;
  const std::vector<DeviceCall>& calls = replay.device_.calls;
  for (size_t i = 0; i < calls.size(); ++i) {
    const DeviceCall& c = calls[i];
    if (c.what == "host") placed = true;
    if (c.address < a || c.address >= a + 4 * kMiB) continue;
    if (c.what == "to_device" && placed) ++to_device;
    if (c.what == "to_host" && placed) {  // (before: the learned policy's evictions)
      ++to_host;
      // The room it frees is the ledger's: an order event recorded after it on its stream, and
      // what takes that room waits for it.
      ASSERT_LT(i + 1, calls.size());
      EXPECT_EQ(calls[i + 1].what, "record");
      EXPECT_EQ(calls[i + 1].stream, c.stream);
      EXPECT_TRUE(std::any_of(
          calls.begin() + static_cast<std::ptrdiff_t>(i) + 2, calls.end(),
          [&](const DeviceCall& w) { return w.what == "wait" && w.event == calls[i + 1].event; }))
          << "nothing waits for the write-back's room";
    }
  }
  EXPECT_EQ(to_device, 0u);
  EXPECT_EQ(to_host, 1u);
  EXPECT_EQ(replay.Adherence().host_placements, 1u);
  EXPECT_LE(replay.engine_.resident_estimate(), budget);
}

TEST(HostPlacement, RefusedPlacementIsOneLineAndTheAllocationIsSwapped) {
  const Workload w = HostStep();
  const uint64_t budget = 12 * kMiB;  // X fits beside A
  const PolicyFile plan = PlanWithRule(w, budget, SizeRule(6 * kMiB, RuleAction::kHost));
  Logged log;
  Replay replay(w, MakePlannedPolicy(plan, "host.policy.toml", budget, log.Sink()), budget);
  replay.device_.fail_place_on_host = true;
  replay.Init();
  for (int i = 0; i < 3; ++i) replay.Step();
  ASSERT_EQ(log.problems.size(), 1u);
  EXPECT_NE(log.problems[0].find("host.policy.toml: the device refused to place an allocation of "
                                 "6291456 bytes on the host (cuMemAdvise: error 801)"),
            std::string::npos)
      << log.problems[0];
  const ScheduleAdherence a = replay.Adherence();
  EXPECT_EQ(a.host_failures, 3u);
  EXPECT_EQ(a.host_placements, 0u);
  EXPECT_EQ(a.host_bytes, 0u);
  // Swapped: the engine brings the first X to the device as any other allocation.
  const std::vector<uint64_t> xs = AllocationsOf(replay.device_, 6 * kMiB);
  ASSERT_EQ(xs.size(), 3u);
  EXPECT_GT(CallsOn(replay, "to_device", xs[0], 6 * kMiB), 0u);
}

TEST(HostPlacement, NeverRuleAllocationsAreNotMovedByTheEngine) {
  const Workload w = HostStep();
  const uint64_t budget = 6 * kMiB;
  const PolicyFile plan = PlanWithRule(w, budget, SizeRule(6 * kMiB, RuleAction::kNever));
  Replay replay(w, MakePlannedPolicy(plan, "never.policy.toml", budget, nullptr), budget);
  replay.Init();
  for (int i = 0; i < 3; ++i) replay.Step();
  EXPECT_TRUE(replay.device_.Calls("host").empty());
  for (const uint64_t x : AllocationsOf(replay.device_, 6 * kMiB)) {
    for (const char* what : {"to_device", "to_host", "populate"}) {
      EXPECT_EQ(CallsOn(replay, what, x, 6 * kMiB), 0u) << what;
    }
  }
}

// An arena (16 MiB, reached through interior pointers) moved slice by slice: a launch waits only
// for the side-stream prefetch of the chunks its pointer names, never for the event after the
// prefetch of another slice (the schedule's ordering state is kept per chunk for arenas).
TEST(PlannedPolicy, ArenaLaunchWaitsOnlyForThePrefetchOfItsOwnChunks) {
  Workload w;
  w.name = "arena";
  for (const uint64_t bytes : {16 * kMiB, 8 * kMiB}) {
    WorkloadAllocation a;
    a.id = w.allocations.size() + 1;
    a.bytes = bytes;
    a.persistent = true;
    w.allocations.push_back(a);
  }
  const std::vector<ChunkRange> ranges = {{1, 0, 2}, {1, 2, 2}, {1, 4, 2}, {1, 6, 2}, {2, 0, 4}};
  for (const ChunkRange& r : ranges) {
    StepEvent e;
    e.launch.kernel = "k" + std::to_string(w.step.size());
    e.launch.compute_seconds = 1e-4;
    e.launch.accesses = {r};
    w.step.push_back(e);
  }
  const uint64_t budget = 12 * kMiB;
  // The plan brings each slice in at its own launch; move the prefetch of chunks 4-5 to the
  // launch using chunks 2-3, after that launch's own: the newest prefetch of the arena before that
  // launch is then of a slice it does not use.
  PolicyFile plan = Plan(w, budget);
  ScheduleEntry* slice = nullptr;
  bool moved = false;
  for (ScheduleEntry& e : plan.schedule) {
    for (const ChunkRange& r : e.prefetch) {
      if (r.alloc_id == 1 && r.first_chunk == 2 && r.num_chunks == 2) slice = &e;
    }
  }
  ASSERT_NE(slice, nullptr) << FormatPolicyFile(plan);
  for (ScheduleEntry& e : plan.schedule) {
    for (auto r = e.prefetch.begin(); r != e.prefetch.end(); ++r) {
      if (&e != slice && r->alloc_id == 1 && r->first_chunk == 4 && r->num_chunks == 2 && !moved) {
        slice->prefetch.push_back(*r);
        e.prefetch.erase(r);
        moved = true;
        break;
      }
    }
  }
  ASSERT_TRUE(moved) << FormatPolicyFile(plan);
  FakeDevice device;
  ResidencyEngine engine(&device, MakePlannedPolicy(plan, "arena.toml", budget, nullptr), budget);
  AllocationRegistry registry;
  std::vector<Allocation> live;
  for (const WorkloadAllocation& a : w.allocations) {
    uint64_t address = 0;
    device.AllocateManaged(&address, a.bytes);
    live.push_back(registry.Insert(address, a.bytes, Backing::kManaged, false, true));
    engine.OnAllocated(live.back());
  }
  std::map<Event, std::vector<uint64_t>> prefetched;  // side-stream event -> addresses before it
  std::vector<uint64_t> since_record;
  Stream side = nullptr;
  int launch_waits = 0, arena_waits = 0;
  for (int step = 0; step < 5; ++step) {
    for (const ChunkRange& r : ranges) {
      const Allocation& a = live[r.alloc_id - 1];
      const uint64_t first = a.base + uint64_t{r.first_chunk} * kChunkBytes;
      const uint64_t end = first + uint64_t{r.num_chunks} * kChunkBytes;
      const size_t from = device.calls.size();
      engine.OnLaunch(AccessSet{a}, std::vector<uint64_t>{first}, kStream);
      for (size_t i = from; i < device.calls.size(); ++i) {
        const DeviceCall& c = device.calls[i];
        if (side == nullptr && c.what == "stream") side = c.stream;
        if (c.stream == side && c.what == "to_device") since_record.push_back(c.address);
        if (c.stream == side && c.what == "record") {
          prefetched[c.event] = since_record;
          since_record.clear();
        }
        if (c.stream != kStream || c.what != "wait" || !prefetched.contains(c.event)) continue;
        ++launch_waits;
        if (r.alloc_id != 1) continue;
        ++arena_waits;
        // The event after the newest prefetch of one of its own chunks.
        const std::vector<uint64_t>& in = prefetched[c.event];
        const auto own = [&](uint64_t address) { return address >= first && address < end; };
        EXPECT_TRUE(std::any_of(in.begin(), in.end(), own))
            << "step " << step << ": the launch using arena chunks " << r.first_chunk << "+"
            << r.num_chunks << " waits for the prefetch of chunk "
            << (in.empty() ? 0 : (in[0] - a.base) / kChunkBytes);
      }
    }
  }
  ScheduleAdherence adherence;
  ASSERT_TRUE(engine.adherence(&adherence));
  EXPECT_GE(adherence.steps_followed, 3u);
  EXPECT_EQ(adherence.mismatches, 0u);
  EXPECT_GT(arena_waits, 0);  // the arena's slices do come in ahead, on the side stream
  EXPECT_GE(launch_waits, arena_waits);
}

// Online planning (MakeOnlinePlannedPolicy) over the fake device, whose clock advances 0.1 ms
// before each launch, so every kernel is timed at 0.1 ms.
struct OnlineReplay {
  OnlineReplay(const Workload& w, uint64_t budget, StepPlanner planner, bool in_background = false)
      : replay(w, MakeOnlinePlannedPolicy(budget, log.Sink(), std::move(planner), in_background),
               budget) {
    replay.device_.events_complete = true;
    replay.before_launch_ = [this] { replay.device_.clock_ms += 0.1; };
  }
  Logged log;
  Replay replay;
};

TEST(OnlinePlan, PlansTheRecordedStepAndFollowsItWithTheSimulatorsBytes) {
  absl::StatusOr<Workload> w = MakeSyntheticWorkload("cnn-small");
  ASSERT_TRUE(w.ok());
  const uint64_t budget = w->peak_live_bytes() / 2;
  std::vector<Workload> recorded;  // the step the planner was given
  std::vector<PolicyFile> plans;   // and what it made of it
  OnlineReplay online(*w, budget, [&](const RecordedEvents& events, uint64_t bytes) {
    absl::StatusOr<Workload> step = WorkloadFromEvents(events, "recorded");
    if (step.ok()) recorded.push_back(*step);
    absl::StatusOr<StepPlan> plan = PlanRecordedSteps(events, bytes);
    if (plan.ok()) plans.push_back(plan->file);
    return plan;
  });
  Replay& replay = online.replay;
  EXPECT_EQ(replay.engine_.policy_name(), "learned");
  replay.Init();
  int steps = 0;
  while (plans.empty() && steps < 8) {
    replay.Step();
    ++steps;
  }
  ASSERT_EQ(plans.size(), 1u) << "no plan after " << steps << " steps";
  ASSERT_EQ(recorded.size(), 1u);
  // The recorded step is the job's: its launches, its allocations and the signature the engine
  // recognises it by, every kernel at the 0.1 ms it was timed at.
  EXPECT_EQ(recorded[0].num_launches(), w->num_launches());
  EXPECT_EQ(recorded[0].allocations.size(), w->allocations.size());
  EXPECT_EQ(recorded[0].persistent_bytes(), w->persistent_bytes());
  EXPECT_EQ(ComputeStepSignature(recorded[0]).signature, ComputeStepSignature(*w).signature);
  for (const StepEvent& e : recorded[0].step) {
    if (e.kind == StepEvent::Kind::kLaunch) {
      EXPECT_NEAR(e.launch.compute_seconds, 1e-4, 1e-6);
    }
  }
  EXPECT_EQ(plans[0].budget_bytes, budget / kPieceBytes * kPieceBytes);
  ASSERT_FALSE(online.log.news.empty());
  EXPECT_NE(online.log.news[0].find("online plan: planned the job's step ("), std::string::npos)
      << online.log.news[0];

  // Followed from the next step that matches it, with the simulator's bytes per step.
  replay.Step();
  replay.Step();
  const ScheduleAdherence before = replay.Adherence();
  EXPECT_TRUE(before.aligned);
  EXPECT_EQ(before.path, "online plan");
  replay.Step();
  const ScheduleAdherence after = replay.Adherence();
  ASSERT_EQ(after.steps_followed, before.steps_followed + 1);
  SimOptions options;
  options.device_memory = budget;
  const SimResult predicted = SimulatePlanned(recorded[0], plans[0], options);
  EXPECT_EQ(predicted.demand_faults, 0u);
  EXPECT_EQ(after.prefetch_bytes - before.prefetch_bytes, predicted.h2d_bytes);
  // Discards are written back (a copy the plan does not see may read them), and priced so.
  EXPECT_EQ(after.evict_bytes - before.evict_bytes + after.discard_bytes - before.discard_bytes,
            predicted.d2h_bytes);
  EXPECT_EQ(after.moves_issued, after.moves_planned);
  EXPECT_EQ(after.mismatches, 0u);
  // The plan brings in all the step uses, from the first step followed on: the engine has had to
  // load nothing itself.
  EXPECT_EQ(after.unscheduled_load_bytes, 0u);
  EXPECT_TRUE(online.log.problems.empty()) << online.log.problems[0];
  EXPECT_EQ(replay.engine_.policy_name(), "learned");  // it is the learned policy, planning
}

// Planning on a thread of its own: while the planner runs, the job's launches go on under the
// learned policy (the planner here waits until two more steps have run); a later launch takes
// the plan, which is then followed as one planned inline is.
TEST(OnlinePlan, PlanningOnItsOwnThreadLetsTheLaunchesGoOnAndItsPlanIsFollowedOnceTaken) {
  absl::StatusOr<Workload> w = MakeSyntheticWorkload("cnn-small");
  ASSERT_TRUE(w.ok());
  const uint64_t budget = w->peak_live_bytes() / 2;
  absl::Notification started, release;
  std::thread::id planner_thread;
  OnlineReplay online(
      *w, budget,
      [&](const RecordedEvents& events, uint64_t bytes) {
        planner_thread = std::this_thread::get_id();
        started.Notify();
        release.WaitForNotification();
        return PlanRecordedSteps(events, bytes);
      },
      /*in_background=*/true);
  Replay& replay = online.replay;
  replay.Init();
  int steps = 0;
  while (!started.HasBeenNotified() && steps < 8) {
    replay.Step();
    ++steps;
  }
  ASSERT_TRUE(started.HasBeenNotified()) << "no planning after " << steps << " steps";
  replay.Step();  // the planner is still waiting: these steps are the learned policy's
  replay.Step();
  EXPECT_NE(planner_thread, std::this_thread::get_id());
  EXPECT_FALSE(replay.Adherence().aligned);
  EXPECT_EQ(replay.Adherence().positions_followed, 0u);
  EXPECT_TRUE(online.log.news.empty());
  release.Notify();
  // The plan is taken by a launch once the thread has stored it, and followed from the next step
  // that matches it.
  for (int i = 0; i < 2000 && replay.Adherence().steps_followed < 2; ++i) {
    replay.Step();
    if (online.log.news.empty()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  const ScheduleAdherence followed = replay.Adherence();
  EXPECT_GE(followed.steps_followed, 2u);
  EXPECT_EQ(followed.path, "online plan");
  EXPECT_EQ(followed.moves_issued, followed.moves_planned);
  EXPECT_EQ(followed.mismatches, 0u);
  ASSERT_FALSE(online.log.news.empty());
  EXPECT_NE(online.log.news[0].find(" on its own thread, from "), std::string::npos)
      << online.log.news[0];
  EXPECT_TRUE(online.log.problems.empty()) << online.log.problems[0];
}

TEST(OnlinePlan, APlannerThatFailsIsTriedThreeTimesThenOneLineAndTheLearnedPolicysMoves) {
  const Workload w = SmallStep();
  const uint64_t budget = 6 * kMiB;
  int calls = 0;
  OnlineReplay online(w, budget, [&calls](const RecordedEvents&, uint64_t) {
    ++calls;
    return absl::StatusOr<StepPlan>(absl::InvalidArgumentError("nothing to plan here"));
  });
  Replay& replay = online.replay;
  replay.Init();
  constexpr int kSteps = 12;
  for (int i = 0; i < kSteps; ++i) replay.Step();
  EXPECT_EQ(calls, 3);
  ASSERT_EQ(online.log.problems.size(), 1u);
  EXPECT_EQ(online.log.problems[0],
            "online plan: nothing to plan here; the learned policy decides");
  EXPECT_TRUE(online.log.news.empty());
  EXPECT_FALSE(replay.Adherence().aligned);
  EXPECT_EQ(replay.Adherence().positions_followed, 0u);
  EXPECT_EQ(replay.Moves(), LearnedMoves(w, budget, kSteps));
}

// A recording in which the step finder finds no two whole steps yet (the learned policy locked a
// stretch within the step and asked too soon) uses up no try: it is planned again each time the
// recording has doubled, until a plan comes.
TEST(OnlinePlan, ARecordingWithNoWholeStepsYetIsPlannedAgainWhenTwiceAsLong) {
  const Workload w = SmallStep();
  const uint64_t budget = 6 * kMiB;
  std::vector<size_t> launches_at_call;
  OnlineReplay online(w, budget, [&](const RecordedEvents& events, uint64_t bytes) {
    launches_at_call.push_back(events.launches());
    if (launches_at_call.size() <= 4) {
      return absl::StatusOr<StepPlan>(absl::NotFoundError(
          "the recorded steps: no repeating training step found in its 9 allocations, frees and "
          "launches (at least two whole steps are needed)"));
    }
    return PlanRecordedSteps(events, bytes);
  });
  Replay& replay = online.replay;
  replay.Init();
  for (int i = 0; i < 80 && !replay.Adherence().aligned; ++i) replay.Step();
  ASSERT_EQ(launches_at_call.size(), 5u) << ::testing::PrintToString(launches_at_call);
  for (size_t i = 1; i < launches_at_call.size(); ++i) {
    EXPECT_GE(launches_at_call[i], 2 * launches_at_call[i - 1]) << "call " << i;
  }
  EXPECT_TRUE(online.log.problems.empty()) << online.log.problems[0];
  EXPECT_TRUE(replay.Adherence().aligned);
}

// A job whose step changes after it was planned (bigger activations from some step on) leaves the
// plan; once no step has matched it for a while the step is recorded again from the allocations
// live then, planned again and followed.
// A first step unlike the rest (two launches the other way round, as a first step that creates
// the optimizer's state shifts the pairing) moves a launch while the step is recorded, once: the
// step is still planned and followed (a recorded NMT step was not planned for this). Launches that
// move step after step are not (TrainLike.LaunchesInAnOrderThatChangesEveryStepKeepTheLearnedStep).
TEST(OnlinePlan, AStepUnlikeTheRestWhileRecordingStillLetsTheStepBePlanned) {
  absl::StatusOr<Workload> w = MakeSyntheticWorkload("cnn-small");
  ASSERT_TRUE(w.ok());
  Workload odd = *w;
  size_t swapped = 0;
  for (size_t i = odd.step.size() / 2; i + 1 < odd.step.size(); ++i) {
    const StepEvent &a = odd.step[i], &b = odd.step[i + 1];
    if (a.kind == StepEvent::Kind::kLaunch && b.kind == StepEvent::Kind::kLaunch &&
        a.launch.kernel != b.launch.kernel) {
      std::swap(odd.step[i], odd.step[i + 1]);
      swapped = i;
      break;
    }
  }
  ASSERT_NE(swapped, 0u);
  OnlineReplay online(*w, w->peak_live_bytes() / 2, PlanRecordedSteps);
  Replay& replay = online.replay;
  replay.Init();
  replay.Step(&odd);
  for (int i = 0; i < 16; ++i) replay.Step();
  EXPECT_GT(replay.engine_.reordered_launches(), 0u);
  EXPECT_GE(replay.Adherence().steps_followed, 2u);
  for (const std::string& line : online.log.news) {
    EXPECT_EQ(line.find("order that changes"), std::string::npos) << line;
  }
}

TEST(OnlinePlan, AStepThatChangesIsRecordedAndPlannedAgain) {
  const Workload small = SmallStep(2 * kMiB), big = SmallStep(4 * kMiB);
  const uint64_t budget = 8 * kMiB;
  std::vector<Workload> recorded;
  OnlineReplay online(small, budget, [&](const RecordedEvents& events, uint64_t bytes) {
    absl::StatusOr<Workload> step = WorkloadFromEvents(events, "recorded");
    if (step.ok()) recorded.push_back(*step);
    return PlanRecordedSteps(events, bytes);
  });
  Replay& replay = online.replay;
  replay.Init();
  for (int i = 0; i < 12; ++i) replay.Step();
  ASSERT_EQ(recorded.size(), 1u);
  EXPECT_GE(replay.Adherence().steps_followed, 2u);
  EXPECT_EQ(ComputeStepSignature(recorded[0]).signature, ComputeStepSignature(small).signature);

  int steps = 0;
  while (recorded.size() < 2 && steps < 400) {
    replay.Step(&big);
    ++steps;
  }
  ASSERT_EQ(recorded.size(), 2u) << "not planned again after " << steps << " steps";
  EXPECT_EQ(ComputeStepSignature(recorded[1]).signature, ComputeStepSignature(big).signature);
  for (int i = 0; i < 3; ++i) replay.Step(&big);
  const ScheduleAdherence a = replay.Adherence();
  EXPECT_TRUE(a.aligned);
  EXPECT_EQ(a.alignments, 2u);
  EXPECT_EQ(a.mismatches, 1u);
  EXPECT_EQ(a.moves_issued, a.moves_planned);
  ASSERT_EQ(online.log.problems.size(), 1u);  // the mismatch
  EXPECT_NE(online.log.problems[0].find("do not match the policy's step signature"),
            std::string::npos)
      << online.log.problems[0];
  bool recording_again = false;
  for (const std::string& line : online.log.news) {
    recording_again = recording_again || line.find("recording it again") != std::string::npos;
  }
  EXPECT_TRUE(recording_again);
}

// Each plan is tried against the learned policy on the device's clock: here a launch takes
// 0.1 ms while the learned policy decides and `plan_ms` while the plan is followed. A plan that
// runs slower is dropped after its trial, one line saying so; a faster one is followed on.
TEST(OnlinePlan, APlanIsFollowedOnOnlyWhenItsStepsRunFasterThanTheLearnedPolicys) {
  for (const double plan_ms : {0.2, 0.05}) {
    SCOPED_TRACE("a launch " + std::to_string(plan_ms) + " ms following the plan");
    const Workload w = SmallStep();
    OnlineReplay online(w, 6 * kMiB, [](const RecordedEvents& events, uint64_t bytes) {
      return PlanRecordedSteps(events, bytes);
    });
    Replay& replay = online.replay;
    replay.before_launch_ = [&replay, plan_ms] {
      replay.device_.clock_ms += replay.Adherence().aligned ? plan_ms : 0.1;
    };
    replay.Init();
    int steps = 0;
    while (replay.Adherence().trial != "kept" && replay.Adherence().trial != "rejected" &&
           steps < 100) {
      replay.Step();
      ++steps;
    }
    const ScheduleAdherence a = replay.Adherence();
    ASSERT_TRUE(a.trial == "kept" || a.trial == "rejected")
        << "no verdict in " << steps << " steps: " << a.trial;
    // A step is the workload's five launches.
    EXPECT_NEAR(a.trial_plan_step_seconds, 5 * plan_ms * 1e-3, 1e-9);
    EXPECT_NEAR(a.trial_learned_step_seconds, 5 * 0.1e-3, 1e-9);
    const bool kept = plan_ms < 0.1;
    EXPECT_EQ(a.trial, kept ? "kept" : "rejected");
    ASSERT_FALSE(online.log.news.empty());
    EXPECT_NE(online.log.news.back().find(kept ? "; following the plan"
                                               : "; the learned policy decides from now on"),
              std::string::npos)
        << online.log.news.back();
    EXPECT_TRUE(online.log.problems.empty()) << online.log.problems[0];
    for (int i = 0; i < 4; ++i) replay.Step();
    const ScheduleAdherence later = replay.Adherence();
    EXPECT_EQ(later.aligned, kept);
    if (kept) {
      EXPECT_EQ(later.steps_followed, a.steps_followed + 4);
    } else {
      EXPECT_EQ(later.positions_followed, a.positions_followed);
      EXPECT_EQ(later.fallback_reason, online.log.news.back());
    }
  }
}

// Online planning keeps the learned policy warm across the switches between following the plan
// (the engine keeps arenas whole) and the learned policy deciding (arenas split into chunks): it
// sees the arena's chunks all along, so the step it locked stays locked through the plan, the
// trial's learned steps and what comes after the verdict. (It also needs the engine to split the
// arena again with the tensor offsets seen while it was whole: without them a pointer names every
// chunk up to the arena's end for a while, and the learned policy's step unlocks for 8 launches.)
// Through every switch, the engine's count of what is on the device is what its calls left there
// (the plan moves the arena chunk by chunk; the learned policy's first steps leave the arena,
// larger than the budget, to the kernels' paging, which no count has): a count short of it made
// the learned policy's trial steps fill the device past the budget (NMT at 1.25x on simgpu: 87 MiB
// evicted by the device on its own).
TEST(OnlinePlan, TheLearnedPolicyKeepsItsStepThroughThePlanAndTheTrial) {
  FakeDevice device;
  const uint64_t budget = 8 * kMiB;
  Logged log;
  ResidencyEngine engine(&device,
                         MakeOnlinePlannedPolicy(budget, log.Sink(),
                                                 [](const RecordedEvents& events, uint64_t bytes) {
                                                   return PlanRecordedSteps(events, bytes);
                                                 }),
                         budget);
  AllocationRegistry registry;
  // An arena (ResidencyEngine::kArenaMinBytes at least) of four 4 MiB tensors, and two weights.
  std::vector<Allocation> live;
  for (const uint64_t bytes : {16 * kMiB, 2 * kMiB, 2 * kMiB}) {
    uint64_t address = 0;
    device.AllocateManaged(&address, bytes);
    live.push_back(registry.Insert(address, bytes, Backing::kManaged, false, true));
    engine.OnAllocated(live.back());
  }
  struct Use {
    uint64_t tensor;  // of the arena, through a pointer to its start
    size_t weight;
  };
  const std::vector<Use> step = {{0, 1}, {1, 2}, {2, 1}, {3, 2}, {1, 1}, {0, 2}};
  const std::vector<std::pair<size_t, uint64_t>> no_paging;
  bool locked = false, followed = false, left = false;
  int unlocked_launches = 0;
  ScheduleAdherence a;
  for (int s = 0; s < 60 && !(a.trial == "kept" || a.trial == "rejected"); ++s) {
    for (size_t i = 0; i < step.size(); ++i) {
      device.clock_ms += 0.1;
      const Allocation& weight = live[step[i].weight];
      engine.OnLaunch(AccessSet{live[0], weight},
                      std::vector<uint64_t>{live[0].base + step[i].tensor * 4 * kMiB, weight.base},
                      kStream, i + 1);
      EXPECT_EQ(engine.resident_estimate(), OnDeviceByCalls(device.calls, no_paging, live))
          << "step " << s << ", launch " << i;
      locked = locked || engine.step_length() != 0;
      if (locked && engine.step_length() == 0) ++unlocked_launches;
      ASSERT_TRUE(engine.adherence(&a));
      followed = followed || a.aligned;
      left = left || (followed && !a.aligned);
    }
  }
  ASSERT_TRUE(a.trial == "kept" || a.trial == "rejected") << a.trial;
  EXPECT_TRUE(followed);
  EXPECT_TRUE(left);  // the trial's learned steps: the engine split the arena again
  EXPECT_EQ(engine.step_length(), step.size());
  EXPECT_EQ(unlocked_launches, 0);
  EXPECT_EQ(a.mismatches, 0u);
}

}  // namespace
}  // namespace spillway::policy
