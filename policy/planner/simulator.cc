// The step simulator (see simulator.h). All policies share the chunk-level residency state below
// (what simgpu keeps: resident chunks in the order they became resident) and the engine timelines
// (compute, H2D, D2H as in simgpu's BookEngine).
#include "policy/planner/simulator.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <limits>
#include <string>
#include <unordered_map>

#include "absl/strings/str_format.h"
#include "common/size.h"
#include "policy/planner/simulator_replay.h"
#include "policy/planner/simulator_residency.h"

namespace spillway::policy {
namespace {

using Kind = StepEvent::Kind;

// Steps an EvictionPolicy runs before the reported one (the learned policy detects the step
// online; lru and demand paging are steady after one).
constexpr uint32_t kPolicyWarmupSteps = 3;

// Counts into the result only during the measured step; measures its compute-timeline span.
class StepMeter {
 public:
  explicit StepMeter(SimResult* r, uint32_t measured = kMeasuredStep)
      : r_(r), measured_(measured) {}
  bool On(uint32_t step) const { return step == measured_; }
  void StepBoundary(uint32_t step, double compute_end) {
    if (step == measured_) start_ = compute_end;
    if (step == measured_ + 1) r_->step_seconds = compute_end - start_;
  }

 private:
  SimResult* r_;
  uint32_t measured_;
  double start_ = 0;
};

// Drives `on_item` over the replay and closes the measured step.
template <typename F>
void ForEachItem(const Replay& r, Timelines& t, StepMeter& meter, F on_item) {
  uint32_t step = 0;
  for (const ReplayItem& item : r.items) {
    if (item.step != step) {
      meter.StepBoundary(item.step, t.compute);
      step = item.step;
    }
    on_item(item);
  }
  meter.StepBoundary(step + 1, t.compute);
}

uint32_t ChunkEnd(const Replay& r, uint64_t id) {
  return id + 1 < r.base.size() ? r.base[id + 1] : r.total_chunks;
}

double ComputeOf(const ReplayItem& item, const SimOptions& o) {
  return item.launch->compute_seconds > 0 ? item.launch->compute_seconds
                                          : o.cost.default_kernel_seconds;
}

}  // namespace

SimResult SimulateDemandPaging(const Workload& w, const SimOptions& o) {
  const Replay r = BuildReplay(w);
  SimResult res;
  res.policy = "demand";
  ChunkResidency state(r.footprint);
  std::vector<char> populated(r.total_chunks, 0);  // holds data: resident since allocated
  for (const WorkloadAllocation& a : w.allocations) {
    if (!a.persistent) continue;  // persistent data was written before the replay
    for (uint32_t c = r.base[a.id]; c < ChunkEnd(r, a.id); ++c) populated[c] = 1;
  }
  Timelines t;
  StepMeter meter(&res);
  const uint64_t cap = o.capacity_bytes();
  ForEachItem(r, t, meter, [&](const ReplayItem& item) {
    if (item.kind != Kind::kLaunch) {
      for (uint32_t c = r.base[item.alloc_id]; c < ChunkEnd(r, item.alloc_id); ++c) {
        state.Remove(c);
        populated[c] = 0;
      }
      return;
    }
    uint64_t faults = 0, faulted = 0, copied = 0, evicted = 0;  // faulted .. evicted: bytes
    for (uint32_t c : item.chunks) {
      if (state.resident(c)) continue;
      evicted += state.EvictOldestFor(cap, r.footprint[c]);
      if (state.bytes() + r.footprint[c] > cap && meter.On(item.step)) ++res.overcommit_chunks;
      state.Add(c);
      ++faults;
      faulted += r.footprint[c];
      if (populated[c]) copied += r.footprint[c];
      populated[c] = 1;
    }
    // simgpu's FaultStallSeconds: every batch costs its latency, only chunks with data copy in.
    const double stall =
        FaultStallSeconds(o.cost, copied, evicted) +
        static_cast<double>(FaultBatches(o.cost, faulted) - FaultBatches(o.cost, copied)) *
            o.cost.fault_batch_seconds;
    t.compute += ComputeOf(item, o) + stall;
    if (meter.On(item.step)) {
      res.demand_faults += faults;
      res.fault_batches += FaultBatches(o.cost, faulted);
      res.h2d_bytes += copied;
      res.d2h_bytes += evicted;
      res.compute_seconds += ComputeOf(item, o);
    }
  });
  return res;
}

SimResult SimulateEvictionPolicy(const Workload& w, const SimOptions& o,
                                 const std::function<std::unique_ptr<EvictionPolicy>()>& make,
                                 const std::string& name) {
  // Learning policies see a few steps before the one reported.
  const Replay r = BuildReplay(w, kPolicyWarmupSteps + 2);
  SimResult res;
  res.policy = name;
  ChunkResidency state(r.footprint);
  Timelines t;
  t.engines = o.cost.copy_engines;
  StepMeter meter(&res, kPolicyWarmupSteps);
  const uint64_t cap = o.capacity_bytes();
  std::unique_ptr<EvictionPolicy> policy = make();
  // What ResidencyEngine tracks per managed allocation.
  struct Tracked {
    bool live = false, resident = false;
    uint64_t used_by_launch = 0;
  };
  std::vector<Tracked> tracked(w.allocations.size() + 1);
  for (const WorkloadAllocation& a : w.allocations) tracked[a.id].live = a.persistent;
  uint64_t resident_bytes = 0, stamp = 0;
  auto size_of = [&](uint64_t id) { return FootprintOf(w.allocation(id).bytes); };
  // The engine gives every allocation its own id: a step-local allocation gets a new one each
  // step (id + step x period), which maps back to the workload's id modulo the period.
  const uint64_t period = w.allocations.size() + 1;
  auto policy_id = [&](uint64_t id, uint32_t step) {
    return w.allocation(id).persistent ? id : id + uint64_t{step} * period;
  };
  struct Context {
    const std::vector<Tracked>* tracked;
    uint64_t stamp;
    uint64_t period;
  };
  auto evictable = [](const void* ctx, uint64_t pid) {
    const auto* c = static_cast<const Context*>(ctx);
    const Tracked& tr = (*c->tracked)[pid % c->period];
    return tr.live && tr.resident && tr.used_by_launch != c->stamp;
  };
  ForEachItem(r, t, meter, [&](const ReplayItem& item) {
    const bool on = meter.On(item.step);
    if (item.kind == Kind::kAlloc) {
      tracked[item.alloc_id] = Tracked{true, false, 0};
      return;
    }
    if (item.kind == Kind::kFree) {  // the engine discards, then forgets
      Tracked& tr = tracked[item.alloc_id];
      if (tr.resident) resident_bytes -= size_of(item.alloc_id);
      tr = Tracked{};
      policy->Forget(policy_id(item.alloc_id, item.step));
      for (uint32_t c = r.base[item.alloc_id]; c < ChunkEnd(r, item.alloc_id); ++c) {
        if (state.resident(c) && on) res.discarded_bytes += r.footprint[c];
        state.Remove(c);
      }
      return;
    }
    // ResidencyEngine::OnLaunch: touch, evict whole allocations, prefetch what fits.
    ++stamp;
    uint64_t needed = 0;
    std::vector<uint64_t> ids, pids, sizes;
    for (const ChunkRange& a : item.launch->accesses) {
      if (std::find(ids.begin(), ids.end(), a.alloc_id) != ids.end()) continue;
      ids.push_back(a.alloc_id);
      pids.push_back(policy_id(a.alloc_id, item.step));
      sizes.push_back(w.allocation(a.alloc_id).bytes);
    }
    policy->ObserveLaunch(LaunchView{std::hash<std::string>()(item.launch->kernel) | 1, pids.data(),
                                     sizes.data(), pids.size()});
    for (size_t i = 0; i < ids.size(); ++i) {
      tracked[ids[i]].used_by_launch = stamp;
      policy->Touch(pids[i]);
      if (!tracked[ids[i]].resident) needed += size_of(ids[i]);
    }
    const Context ctx{&tracked, stamp, period};
    uint64_t out = 0, in = 0, in_evicted = 0;
    while (resident_bytes + needed > cap) {
      const uint64_t pv = policy->PickVictim(evictable, &ctx);
      if (pv == 0) break;
      const uint64_t v = pv % period;
      tracked[v].resident = false;
      resident_bytes -= size_of(v);
      for (uint32_t c = r.base[v]; c < ChunkEnd(r, v); ++c) {
        if (state.resident(c)) out += r.footprint[c];
        state.Remove(c);
      }
    }
    std::vector<char> in_launch_guard;  // simgpu's FIFO evicts any chunk but the one moving
    for (uint64_t id : ids) {
      if (tracked[id].resident || resident_bytes + size_of(id) > cap) continue;
      tracked[id].resident = true;
      resident_bytes += size_of(id);
      for (uint32_t c = r.base[id]; c < ChunkEnd(r, id); ++c) {
        if (state.resident(c)) continue;
        in_evicted += state.EvictOldestFor(cap, r.footprint[c]);
        state.Add(c);
        in += r.footprint[c];
      }
    }
    // Stream order: evictions, then prefetches, then the kernel (which faults what is missing).
    double ready = t.compute;
    if (out > 0) ready = t.Book(false, ready, D2HSeconds(o.cost, out));
    if (in > 0) {
      double end = t.Book(true, ready, H2DSeconds(o.cost, in));
      if (in_evicted > 0) end = std::max(end, t.Book(false, ready, D2HSeconds(o.cost, in_evicted)));
      ready = end;
    }
    uint64_t faults = 0, faulted = 0, evicted = 0;  // faulted, evicted: bytes
    for (uint32_t c : item.chunks) {
      if (state.resident(c)) continue;
      evicted += state.EvictOldestFor(cap, r.footprint[c]);
      state.Add(c);
      ++faults;
      faulted += r.footprint[c];
    }
    const double stall = FaultStallSeconds(o.cost, faulted, evicted);
    t.compute = std::max(t.compute, ready) + ComputeOf(item, o) + stall;
    if (on) {
      res.demand_faults += faults;
      res.fault_batches += FaultBatches(o.cost, faulted);
      res.h2d_bytes += in + faulted;
      res.d2h_bytes += out + in_evicted + evicted;
      res.compute_seconds += ComputeOf(item, o);
    }
  });
  return res;
}

SimResult SimulatePlanned(const Workload& w, const PolicyFile& p, const SimOptions& o,
                          std::vector<double>* stalls) {
  const Replay r = BuildReplay(w);
  if (stalls != nullptr) stalls->assign(r.launches_per_step, 0.0);
  SimResult res;
  res.policy = "planned";
  ChunkResidency state(r.footprint);
  Timelines t;
  t.engines = o.cost.copy_engines;
  StepMeter meter(&res);
  const uint64_t cap = o.capacity_bytes();
  std::vector<RuleAction> action(w.allocations.size() + 1, RuleAction::kSwap);
  for (const WorkloadAllocation& a : w.allocations) action[a.id] = p.ActionFor(a);
  std::vector<char> live(w.allocations.size() + 1, 0);
  for (const WorkloadAllocation& a : w.allocations) live[a.id] = a.persistent;
  std::vector<const ScheduleEntry*> at(r.launches_per_step, nullptr);
  for (const ScheduleEntry& e : p.schedule) {
    if (e.position < at.size()) at[e.position] = &e;
  }
  std::vector<double> ready(r.total_chunks, 0), last_end(r.total_chunks, 0);
  // Free device memory, by the time each piece became free (earliest first).
  FreeRoom<double> room(cap);
  auto release = [&](uint32_t c, double when) {
    state.Remove(c);
    room.Give(when, r.footprint[c]);
  };
  // Room for chunk `c` about to become resident, evicting the oldest unpinned chunks while there
  // is too little. Returns when the room is free, or -1 when nothing can go; counts the emergency
  // evictions' bytes in `evicted`.
  auto take_room = [&](uint32_t incoming, const std::vector<uint32_t>* protect, uint64_t* evicted) {
    while (room.bytes() < r.footprint[incoming]) {
      const int64_t v = state.Oldest([&](uint32_t c) {
        return action[r.owner[c]] != RuleAction::kKeep &&
               (protect == nullptr || !std::binary_search(protect->begin(), protect->end(), c));
      });
      if (v < 0) return -1.0;
      const uint32_t c = static_cast<uint32_t>(v);
      const double end = t.Book(false, last_end[c], D2HSeconds(o.cost, r.footprint[c]));
      *evicted += r.footprint[c];
      release(c, end);
    }
    return room.Take(r.footprint[incoming]);
  };
  auto managed = [&](uint64_t id) {
    return live[id] && action[id] != RuleAction::kHost && action[id] != RuleAction::kNever;
  };
  ForEachItem(r, t, meter, [&](const ReplayItem& item) {
    const bool on = meter.On(item.step);
    if (item.kind != Kind::kLaunch) {
      live[item.alloc_id] = item.kind == Kind::kAlloc;
      if (item.kind == Kind::kFree) {
        for (uint32_t c = r.base[item.alloc_id]; c < ChunkEnd(r, item.alloc_id); ++c) {
          if (state.resident(c)) release(c, std::max(last_end[c], t.compute));
        }
      }
      return;
    }
    uint64_t emergency = 0;
    if (const ScheduleEntry* e = at[item.position]) {
      // evict_absent: where resident (after a launch larger than the device it may not be).
      // discard: as the engine runs it, a write-back (a copy the plan does not see may still read
      // what it calls dead: docs/policy.md, "Following").
      for (const std::vector<ChunkRange>* list : {&e->evict_absent, &e->evict, &e->discard}) {
        for (const ChunkRange& cr : *list) {
          if (!managed(cr.alloc_id)) continue;
          for (uint32_t k = 0; k < cr.num_chunks; ++k) {
            const uint32_t c = r.base[cr.alloc_id] + cr.first_chunk + k;
            if (!state.resident(c)) continue;
            // As the engine issues it: after the launch stream's work so far (the launches
            // before this position), which includes the victim's last use.
            release(c, t.Book(false, std::max(last_end[c], t.compute),
                              D2HSeconds(o.cost, r.footprint[c])));
            if (on) res.d2h_bytes += r.footprint[c];
          }
        }
      }
      for (int pass = 0; pass < 2; ++pass) {
        for (const ChunkRange& cr : pass == 0 ? e->prefetch : e->populate) {
          if (!managed(cr.alloc_id)) continue;
          for (uint32_t k = 0; k < cr.num_chunks; ++k) {
            const uint32_t c = r.base[cr.alloc_id] + cr.first_chunk + k;
            if (state.resident(c)) continue;
            const double free_at = take_room(c, nullptr, &emergency);
            if (free_at < 0) break;
            state.Add(c);
            ready[c] =
                pass == 0 ? t.Book(true, free_at, H2DSeconds(o.cost, r.footprint[c])) : free_at;
            if (on && pass == 0) res.h2d_bytes += r.footprint[c];
          }
        }
      }
    }
    double start = t.compute;
    uint64_t faults = 0, faulted = 0, remote = 0;  // faulted, remote: bytes
    for (uint32_t c : item.chunks) {
      const uint64_t id = r.owner[c];
      if (action[id] == RuleAction::kHost) {
        remote += r.footprint[c];
        continue;
      }
      if (state.resident(c)) {
        start = std::max(start, ready[c]);
        continue;
      }
      const double free_at = take_room(c, &item.chunks, &emergency);
      if (free_at < 0 && on) ++res.overcommit_chunks;
      start = std::max(start, free_at);
      state.Add(c);
      ++faults;
      faulted += r.footprint[c];
    }
    const double stall = FaultStallSeconds(o.cost, faulted, 0);
    if (on && stalls != nullptr) (*stalls)[item.position] = start - t.compute + stall;
    t.compute = start + ComputeOf(item, o) + stall + RemoteAccessSeconds(o.cost, remote);
    for (uint32_t c : item.chunks) last_end[c] = t.compute;
    if (on) {
      res.demand_faults += faults;
      res.fault_batches += FaultBatches(o.cost, faulted);
      res.h2d_bytes += faulted;
      res.d2h_bytes += emergency;
      res.remote_bytes += 2 * remote;
      res.compute_seconds += ComputeOf(item, o);
    }
  });
  return res;
}

SimResult ChunkLowerBound(const Workload& w, const SimOptions& o) {
  // Belady's choices in a step also serve the steps around it: the step after a cold start can
  // cost more than a steady one (train_like, 24 layers, 2x: 316 MiB, then 312 MiB a step). So the
  // replay runs kBoundSteps steps and the bound is its cheapest step between the first and last.
  constexpr uint32_t kBoundSteps = 5;
  const Replay r = BuildReplay(w, kBoundSteps);
  const BeladyRun run = RunBelady(r, o.capacity_bytes());
  std::vector<SimResult> steps(kBoundSteps);
  for (const BeladyEvent& e : run.events) {
    SimResult& res = steps[e.step];
    if (e.kind == BeladyEvent::Kind::kLoad && !e.fresh) res.h2d_bytes += r.footprint[e.chunk];
    if (e.kind == BeladyEvent::Kind::kEvict) {
      (e.dead ? res.discarded_bytes : res.d2h_bytes) += r.footprint[e.chunk];
    }
  }
  uint32_t best = 1;
  for (uint32_t s = 2; s + 1 < kBoundSteps; ++s) {
    if (steps[s].bytes_moved() < steps[best].bytes_moved()) best = s;
  }
  SimResult res = steps[best];
  res.policy = "bound";
  for (const ReplayItem& item : r.items) {
    if (item.kind == Kind::kLaunch && item.step == best) res.compute_seconds += ComputeOf(item, o);
  }
  res.step_seconds =
      std::max(res.compute_seconds, CopyEngineSeconds(o.cost, res.h2d_bytes, res.d2h_bytes));
  return res;
}

SimResult CapacityLowerBound(const Workload& w, const SimOptions& o, bool shared_link) {
  const Replay r = BuildReplay(w);
  SimResult res;
  res.policy = shared_link ? "link-bound" : "cap-bound";
  const uint64_t n = r.launches_per_step;
  // Per chunk, in the measured step: the first and last launch position touching it.
  constexpr uint32_t kNone = std::numeric_limits<uint32_t>::max();
  std::vector<uint32_t> first(r.total_chunks, kNone), last(r.total_chunks, kNone);
  std::vector<double> compute_before(n + 1, 0);  // compute of the launches before each position
  for (const ReplayItem& item : r.items) {
    if (item.kind != Kind::kLaunch || item.step != kMeasuredStep) continue;
    compute_before[item.position + 1] = ComputeOf(item, o);
    for (const uint32_t c : item.chunks) {
      if (first[c] == kNone) first[c] = item.position;
      last[c] = item.position;
    }
  }
  for (uint64_t p = 0; p < n; ++p) compute_before[p + 1] += compute_before[p];
  // Bytes of the chunks the step touches (each its footprint), by launch position P, as difference
  // arrays:
  //   made: the step's own chunks touched before P and again from P on (holding data read later);
  //   persistent_from: persistent chunks touched from P on;
  //   persistent_before, own_before: persistent / the step's own chunks touched before P;
  //   own_dead: the step's own chunks last touched before P (dead: they leave without a copy).
  std::vector<int64_t> made(n + 2, 0), persistent_from(n + 2, 0), persistent_before(n + 2, 0),
      own_before(n + 2, 0), own_dead(n + 2, 0);
  for (uint32_t c = 0; c < r.total_chunks; ++c) {
    if (first[c] == kNone) continue;
    const int64_t b = r.footprint[c];
    if (w.allocation(r.owner[c]).persistent) {
      persistent_from[0] += b;
      persistent_from[last[c] + 1] -= b;
      persistent_before[first[c] + 1] += b;
    } else {
      if (last[c] > first[c]) {
        made[first[c] + 1] += b;
        made[last[c] + 1] -= b;
      }
      own_before[first[c] + 1] += b;
      own_dead[last[c] + 1] += b;
    }
  }
  // In bytes: the capacity, the largest chunk (one copy already running), and a byte's time each
  // way.
  const double cap = static_cast<double>(o.capacity_bytes());
  const double chunk = static_cast<double>(kChunkBytes);
  const double h = H2DSeconds(o.cost, 1), d = D2HSeconds(o.cost, 1);
  // What a chunk moved outside the copy engines costs the kernels at least: coming in, a demand
  // fault (its share of a batch's latency + h) or a remote access (h + d); going out, an eviction
  // inside a fault (d + the fault that made it, h + latency) or remote production (h + d). With a
  // shared link those copies take the copy engines' time as well, so nothing bypasses them.
  const double latency = o.cost.fault_batch_seconds /
                         static_cast<double>(std::max<uint64_t>(o.cost.fault_batch_bytes, 1));
  const double in_by_kernel = h + std::min(latency, d), out_by_kernel = h + d;
  // A window with `compute` seconds of kernels that moves `bytes`, each byte on the copy engine
  // (`engine` seconds) or inside the kernels (`by_kernel` seconds): the best split of the bytes.
  auto one_way = [shared_link](double compute, double bytes, double engine, double by_kernel) {
    const double copies = std::max(0.0, bytes) * engine;
    if (copies <= compute) return compute;
    if (shared_link) return copies;
    return compute + by_kernel * (copies - compute) / (by_kernel + engine);
  };
  // Both directions: each alone is a bound (their kernel-side shares are not added up).
  auto window = [&](double compute, double in, double out) {
    return std::max(one_way(compute, in, h, in_by_kernel), one_way(compute, out, d, out_by_kernel));
  };
  int64_t made_at = 0, persistent_from_at = 0, persistent_before_at = 0, own_before_at = 0,
          own_dead_at = 0;
  double best = compute_before[n];
  for (uint64_t p = 0; p < n; ++p) {
    made_at += made[p];
    persistent_from_at += persistent_from[p];
    persistent_before_at += persistent_before[p];
    own_before_at += own_before[p];
    own_dead_at += own_dead[p];
    const auto count = [](int64_t k) { return static_cast<double>(k); };
    // Before P (from the previous step's last kernel to P's start). Data made before P and used
    // from P on beyond the capacity has left by P. Every chunk touched before P had room; with
    // C bytes, all but C bytes of those placements reused room something else left, and what left
    // held data unless it was the step's own and dead (no chunk of the step's own exists at the
    // step's start): at least (touched − C − dead) bytes out, less one chunk already on its way
    // when the window opened. Persistent bytes touched before P beyond the capacity came in.
    const double out_before =
        std::max(count(made_at) - cap,
                 count(persistent_before_at + own_before_at - own_dead_at) - cap - chunk);
    const double in_before = count(persistent_before_at) - cap - chunk;
    // From P on: what holds data at P and is used from P on beyond the capacity comes in; the
    // room argument again, where the step's own chunks may all leave dead: persistent bytes
    // touched from P on beyond the capacity go out.
    const double in_after = count(made_at + persistent_from_at) - cap;
    const double out_after = count(persistent_from_at) - cap - chunk;
    best = std::max(best, window(compute_before[p], in_before, out_before) +
                              window(compute_before[n] - compute_before[p], in_after, out_after));
  }
  // Kernel to kernel (in bytes). While the kernel at Q runs, its chunks S_Q occupy |S_Q| bytes, so
  // when it ends at most C − |S_Q| bytes of the chunks holding data then that a later kernel P
  // touches and Q does not (A_QP: persistent, or the step's own touched before Q) are on the
  // device or on their way; the rest, at least A_QP − C + |S_Q|, come in between the end of Q and
  // the end of P: each at least h there, on the one host-to-device engine before P starts
  // (alongside the kernels between Q and P) or inside P's kernel (a fault; a remote access, h + d).
  // A chunk of Q's read remotely takes no slot but cost Q's kernel h + d: h of it counted as its
  // own arrival, d left, so each arrival is counted at min(h, d). So the end of P is at least the
  // end of Q plus c_P plus the larger of the kernels' time between them and those arrivals', and
  // the best chain of such spans over the step (from the step before's last kernel, Q = −1, to its
  // last, each span at most kSpan launches) is a bound.
  constexpr uint64_t kSpan = 8;
  std::vector<std::vector<uint32_t>> touched(n + 1);  // touched[q + 1]: the chunks of launch q
  for (const ReplayItem& item : r.items) {
    if (item.kind != Kind::kLaunch) continue;
    if (item.step == kMeasuredStep) touched[item.position + 1] = item.chunks;
    if (item.step + 1 == kMeasuredStep && item.position + 1 == n) touched[0] = item.chunks;
  }
  const double arrival = std::min(h, d);
  std::vector<double> touched_bytes(n + 1, 0);
  for (uint64_t q1 = 0; q1 <= n; ++q1) {
    for (const uint32_t c : touched[q1]) touched_bytes[q1] += r.footprint[c];
  }
  std::vector<double> chain(n + 1, 0);  // chain[q + 1]: a bound on the end of launch q
  for (uint64_t p = 0; p < n; ++p) {
    const double c_p = compute_before[p + 1] - compute_before[p];
    for (uint64_t q1 = p + 1 > kSpan ? p + 1 - kSpan : 0; q1 <= p; ++q1) {  // q1 = Q + 1
      const std::vector<uint32_t>& at_q = touched[q1];
      int64_t arriving = 0;
      for (const uint32_t c : touched[p + 1]) {
        const bool holds_data = w.allocation(r.owner[c]).persistent || first[c] + 1 < q1;
        if (holds_data && !std::binary_search(at_q.begin(), at_q.end(), c))
          arriving += r.footprint[c];
      }
      const double late = static_cast<double>(arriving) - cap + touched_bytes[q1];
      const double between = compute_before[p] - compute_before[q1];  // kernels Q + 1 .. P − 1
      chain[p + 1] = std::max(chain[p + 1],
                              chain[q1] + c_p + std::max(between, arrival * std::max(0.0, late)));
    }
  }
  best = std::max(best, chain[n]);
  res.compute_seconds = compute_before[n];
  res.step_seconds = best;
  return res;
}

std::string FormatResultTable(const std::vector<SimResult>& results, const SimResult& bound,
                              const SimResult* tight, const std::vector<SimResult>& more_bounds) {
  std::string out = absl::StrFormat("%-14s %12s %8s %12s %12s %9s %8s", "policy", "bytes moved",
                                    "x bound", "demand flts", "step (ms)", "x bound", "compute");
  out += tight != nullptr ? absl::StrFormat(" %9s\n", "x cap") : "\n";
  auto ratio = [](double a, double b) { return b > 0 ? a / b : (a > 0 ? 1e9 : 1.0); };
  for (const SimResult& s : results) {
    out += absl::StrFormat(
        "%-14s %12s %8.2f %12d %12.2f %9.2f %8.2f", s.policy, FormatSize(s.bytes_moved()),
        ratio(static_cast<double>(s.bytes_moved()), static_cast<double>(bound.bytes_moved())),
        s.demand_faults, s.step_seconds * 1e3, ratio(s.step_seconds, bound.step_seconds),
        s.compute_seconds * 1e3);
    out += tight != nullptr
               ? absl::StrFormat(" %9.2f\n", ratio(s.step_seconds, tight->step_seconds))
               : "\n";
  }
  // A time-only bound: no bytes or faults.
  auto time_row = [&](const SimResult& t) {
    return absl::StrFormat("%-14s %12s %8s %12s %12.2f %9.2f %8.2f %9.2f\n", t.policy, "-", "-",
                           "-", t.step_seconds * 1e3, ratio(t.step_seconds, bound.step_seconds),
                           t.compute_seconds * 1e3, ratio(t.step_seconds, tight->step_seconds));
  };
  if (tight != nullptr) {
    out += time_row(*tight);
    for (const SimResult& t : more_bounds) out += time_row(t);
  }
  // What the engine's driver calls cost the thread that launches (the job's launches not counted).
  std::string calls;
  for (const SimResult& s : results) {
    if (s.host_calls == 0) continue;
    absl::StrAppendFormat(&calls, "%s %s %d (%.2f ms blocked)", calls.empty() ? "" : ",", s.policy,
                          s.host_calls, s.host_call_seconds * 1e3);
  }
  if (!calls.empty()) out += "the engine's priced driver calls a step:" + calls + "\n";
  for (const SimResult& s : results) {
    if (s.early_moves == 0) continue;
    out += absl::StrFormat(
        "%s: %d chunks left the device while a kernel issued before still used them (a move "
        "ordered too early; a GPU faults them back, and the step time above does not count it)\n",
        s.policy, s.early_moves);
  }
  return out;
}

}  // namespace spillway::policy
