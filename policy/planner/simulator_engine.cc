// SimulateEngine (see simulator.h): the residency engine's own code, replayed against a device
// that books simgpu's engines in virtual time (policy/planner/simulator_timeline_device.h). The
// device room a chunk leaves becomes usable when its leaving completes (a write-back's end, a
// discard's turn on its stream), and a chunk coming in waits for the room it takes (the oldest
// free, its bytes' worth), as the engine orders its prefetches after the evictions and frees that
// made it.
#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "policy/engine/residency_engine.h"
#include "policy/plan/planned_policy.h"
#include "policy/planner/simulator.h"
#include "policy/planner/simulator_replay.h"
#include "policy/planner/simulator_residency.h"
#include "policy/planner/simulator_timeline_device.h"

namespace spillway::policy {
namespace {

using Kind = StepEvent::Kind;

// What each launch of the step touches, by position, as chunks of the replay, and the pointer words
// the engine sees. The workload's ranges are what the kernels touch (a trace's arena ranges were
// narrowed to the engine's view when it was read, policy/planner/trace_workload.cc); each access's
// word points into its range's first chunk, so that the engine, which names an arena pointer's
// chunks up to the next pointer's offset (docs/engine.md, "Arenas"), names that range: at the
// chunk's start when no range starting before it reaches into the chunk (the range before ends on
// the chunk boundary), one byte in when one does.
struct EngineAccess {
  std::vector<std::vector<uint32_t>> chunks;        // per position, sorted, distinct
  std::vector<std::vector<uint64_t>> word_offsets;  // per position: per access, bytes from base
};

EngineAccess EngineAccessOf(const Workload& w, const Replay& r) {
  // Per allocation, the chunks that a range starting before them reaches into.
  std::vector<std::vector<uint32_t>> reached(w.allocations.size() + 1);
  for (const StepEvent& e : w.step) {
    if (e.kind != Kind::kLaunch) continue;
    for (const ChunkRange& range : e.launch.accesses) {
      for (uint32_t c = range.first_chunk + 1; c < range.first_chunk + range.num_chunks; ++c)
        reached[range.alloc_id].push_back(c);
    }
  }
  for (std::vector<uint32_t>& v : reached) {
    std::sort(v.begin(), v.end());
    v.erase(std::unique(v.begin(), v.end()), v.end());
  }
  EngineAccess out;
  for (const StepEvent& e : w.step) {
    if (e.kind != Kind::kLaunch) continue;
    std::vector<uint32_t>& chunks = out.chunks.emplace_back();
    std::vector<uint64_t>& offsets = out.word_offsets.emplace_back();
    for (const ChunkRange& range : e.launch.accesses) {
      for (uint32_t c = range.first_chunk; c < range.first_chunk + range.num_chunks; ++c)
        chunks.push_back(r.base[range.alloc_id] + c);
      const std::vector<uint32_t>& in = reached[range.alloc_id];
      const bool inside = std::binary_search(in.begin(), in.end(), range.first_chunk);
      offsets.push_back(uint64_t{range.first_chunk} * kChunkBytes + (inside ? 1 : 0));
    }
    std::sort(chunks.begin(), chunks.end());
    chunks.erase(std::unique(chunks.begin(), chunks.end()), chunks.end());
  }
  return out;
}

}  // namespace

SimResult SimulateEngine(const Workload& w, const SimOptions& o,
                         const std::function<std::unique_ptr<EvictionPolicy>()>& make,
                         const std::string& name, const EngineSimOptions& engine_options) {
  const Replay r = BuildReplay(w, static_cast<int>(kEngineWarmupSteps) + 2);
  SimResult res;
  res.policy = name;
  const uint64_t cap = o.capacity_bytes();
  TimelineDevice device(r.footprint, o.cost, cap);
  EngineOptions options;
  options.lookahead_launches = engine_options.lookahead_launches;
  options.residency_granule = kPieceBytes;  // as the library's engine counts
  options.size_lookahead_from_time = engine_options.lookahead_auto;
  ResidencyEngine engine(&device, make(), cap, options);
  // The engine numbers allocations itself: a step-local allocation gets a new id each step.
  const uint64_t period = w.allocations.size() + 1;
  auto allocation = [&](uint64_t id, uint32_t step) {
    Allocation a;
    a.id = w.allocation(id).persistent ? id : id + uint64_t{step} * period;
    a.base = kTimelineAddressBase + uint64_t{r.base[id]} * kChunkBytes;
    a.size = w.allocation(id).bytes;
    a.backing = Backing::kManaged;
    return a;
  };
  for (const WorkloadAllocation& a : w.allocations) {
    if (a.persistent) engine.OnAllocated(allocation(a.id, 0));
  }
  const EngineAccess touched = EngineAccessOf(w, r);
  const Stream job = device.job_stream();
  AccessSet access;
  std::vector<uint64_t> words;
  double step_start = 0;
  uint32_t step = 0;
  for (const ReplayItem& item : r.items) {
    if (item.step != step) {  // the step ends with its last kernel
      if (item.step == kEngineWarmupSteps) step_start = device.compute_free();
      if (item.step == kEngineWarmupSteps + 1)
        res.step_seconds = device.compute_free() - step_start;
      step = item.step;
      device.set_result(step == kEngineWarmupSteps ? &res : nullptr);
    }
    const uint32_t first = r.base[item.alloc_id];
    const uint32_t end =
        item.alloc_id + 1 < r.base.size() ? r.base[item.alloc_id + 1] : r.total_chunks;
    if (item.kind == Kind::kAlloc) {
      device.Reset(first, end);
      engine.OnAllocated(allocation(item.alloc_id, item.step));
      continue;
    }
    if (item.kind == Kind::kFree) {
      engine.OnFree(allocation(item.alloc_id, item.step), job);
      device.Reset(first, end);
      continue;
    }
    access.clear();
    words.clear();
    for (size_t i = 0; i < item.launch->accesses.size(); ++i) {
      const ChunkRange& range = item.launch->accesses[i];
      const Allocation a = allocation(range.alloc_id, item.step);
      words.push_back(a.base + touched.word_offsets[item.position][i]);
      if (std::none_of(access.begin(), access.end(),
                       [&a](const Allocation& b) { return b.id == a.id; })) {
        access.push_back(a);
      }
    }
    // The host issues a launch once the kernels before it have run (it keeps pace with the
    // device): what completed by then is what the engine's event queries see.
    device.set_host_now(device.compute_free());
    engine.OnLaunch(access, words, job, std::hash<std::string>()(item.launch->kernel) | 1);
    const double compute = item.launch->compute_seconds > 0 ? item.launch->compute_seconds
                                                            : o.cost.default_kernel_seconds;
    device.Launch(job, touched.chunks[item.position], compute);
  }
  return res;
}

SimResult SimulateEngineFollowing(const Workload& w, const PolicyFile& plan, const SimOptions& o) {
  return SimulateEngine(
      w, o,
      [&plan] {
        return MakePlannedPolicy(plan, "(plan)", plan.budget_bytes,
                                 [](bool, const std::string&) {});
      },
      "planned-engine");
}

}  // namespace spillway::policy
