// The planner (see planner.h): Belady's decisions over the replayed steps, turned into a
// per-position schedule for one steady-state step.
#include "policy/planner/planner.h"

#include <algorithm>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "policy/plan/step_signature.h"
#include "policy/planner/schedule_closure.h"
#include "policy/planner/simulator_replay.h"
#include "policy/planner/simulator_residency.h"

namespace spillway::policy {
namespace {

using Move = ChunkMoveKind;

// Appends chunk `c` to `ranges`, extending the last range when contiguous.
void AppendChunk(std::vector<ChunkRange>& ranges, const Replay& r, uint32_t c) {
  const uint64_t id = r.owner[c];
  const uint32_t k = c - r.base[id];
  if (!ranges.empty() && ranges.back().alloc_id == id &&
      ranges.back().first_chunk + ranges.back().num_chunks == k) {
    ++ranges.back().num_chunks;
    return;
  }
  ranges.push_back(ChunkRange{id, k, 1});
}

// Generated `keep` rules: allocations that never move in the measured step and are small (one
// chunk) or used by at least a tenth of the launches.
std::vector<PolicyRule> PinRules(const Workload& w, const Replay& r, const BeladyRun& run) {
  std::vector<char> moved(w.allocations.size() + 1, 0);
  for (const BeladyEvent& e : run.events) {
    if (e.step != kMeasuredStep) continue;
    if (e.kind == BeladyEvent::Kind::kEvict || (e.kind == BeladyEvent::Kind::kLoad && !e.fresh)) {
      moved[r.owner[e.chunk]] = 1;
    }
  }
  std::vector<uint64_t> uses(w.allocations.size() + 1, 0);
  for (const StepEvent& e : w.step) {
    if (e.kind != StepEvent::Kind::kLaunch) continue;
    std::vector<uint64_t> ids;
    for (const ChunkRange& c : e.launch.accesses) ids.push_back(c.alloc_id);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    for (uint64_t id : ids) ++uses[id];
  }
  std::vector<PolicyRule> rules;
  const uint64_t launches = std::max<uint64_t>(w.num_launches(), 1);
  for (const WorkloadAllocation& a : w.allocations) {
    if (moved[a.id] || uses[a.id] == 0) continue;
    if (a.bytes > kChunkBytes && uses[a.id] * 10 < launches) continue;
    if (!rules.empty() && rules.back().last_order + 1 == a.id) {
      rules.back().last_order = a.id;
      continue;
    }
    PolicyRule rule;
    rule.first_order = rule.last_order = a.id;
    rule.action = RuleAction::kKeep;
    rules.push_back(rule);
  }
  return rules;
}

// A chunk is evicted or discarded no sooner than this many launches after its last known use: a
// kernel launched just after that use (on another stream, say) may still read it through a
// pointer stored in device memory (an optimizer reading gradients from a pointer table), which no
// access set names. The engine makes a planned eviction wait for every stream that launched
// after the victim's last known use (schedule_executor.cc), so one launch in between is
// enough for that kernel to be waited for. Measured on train_like (docs/results/
// planner-simulate.md): evictions right after the last use faulted 4-27 times a step; two
// launches, with the engine waiting only for the launch stream and the victim's, worked because
// train_like's optimizer launch came two after; one launch with the engine's wait for every
// stream: "Evictions one launch after the last use".
constexpr uint64_t kRecentUseGuard = 1;

// Launches whose loads Belady decides earlier than their own position: position in the step ->
// how many launches earlier.
using EarlyLoads = std::map<uint32_t, uint32_t>;

// The position of the launch that takes the loads of `position`, `launches` earlier in a step of
// `n` launches (across the step's start: the step before's); nullopt when there is none.
std::optional<size_t> EarlyFrom(uint32_t position, uint32_t launches, size_t n) {
  if (position >= n || launches == 0 || launches >= n) return std::nullopt;
  return (position + n - launches) % n;
}

// Room held free at the step's end: from launch position `from` to the end of the step the
// budget is `chunks` 2 MiB chunks smaller, so Belady sends out more of what the next step needs
// late, while the copy engine back to the host has time for it, and the next step's first launches
// find that room free for what they allocate instead of waiting for copies back. Off when `chunks`
// is 0.
struct HeldRoom {
  uint32_t from = 0;
  uint32_t chunks = 0;
};

// What a schedule is planned with beyond the rules: RunBelady's `idle_horizon` and `dead_weight`,
// the launches whose loads are decided early, and the room held free at the step's end.
struct Knobs {
  uint64_t idle_horizon = 0;
  double dead_weight = kDeadFirst;
  EarlyLoads early;
  HeldRoom held;
};

// The dead-data weights PlanPolicy starts from (RunBelady's `dead_weight`): dead data first, as
// Belady's choice; only when nothing else can go; ranked as if used at its free. The engine
// writes dead data back (docs/policy.md, "Following"), so keeping it on the device until its
// free, where the room is not needed sooner, saves that copy.
constexpr double kDeadWeights[] = {kDeadFirst, 0, 1};

// RunBelady's reserve for `held` in a step of `n` launches (bytes by position).
std::vector<uint64_t> ReserveFor(const HeldRoom& held, size_t n) {
  std::vector<uint64_t> reserve;
  if (held.chunks == 0 || held.from >= n) return reserve;
  reserve.assign(n, 0);
  std::fill(reserve.begin() + held.from, reserve.end(), uint64_t{held.chunks} * kChunkBytes);
  return reserve;
}

// `w` with each launch of `early` also touching, `early`'s count of launches before it, what it
// touches of the allocations live then and until it (across the step's end: persistent ones):
// Belady then makes those chunks resident by that earlier launch, so the room for them is made
// before the launches in between have run, where a load decided at its own launch would wait
// for room that the launch just before it frees.
Workload WithEarlyLoads(const Workload& w, const EarlyLoads& early) {
  if (early.empty()) return w;
  std::vector<size_t> launch_events;
  for (size_t i = 0; i < w.step.size(); ++i) {
    if (w.step[i].kind == StepEvent::Kind::kLaunch) launch_events.push_back(i);
  }
  const size_t n = launch_events.size();
  Workload out = w;
  for (const auto& [position, launches] : early) {
    const std::optional<size_t> from_position = EarlyFrom(position, launches, n);
    if (!from_position) continue;
    const bool wraps = position < launches;
    const size_t from = launch_events[*from_position];
    const size_t to = launch_events[position];
    // Allocated or freed between the two launches (within the step): not live throughout.
    std::vector<char> changes(w.allocations.size() + 1, 0);
    if (!wraps) {
      for (size_t i = from; i < to; ++i) {
        if (w.step[i].kind != StepEvent::Kind::kLaunch) changes[w.step[i].alloc_id] = 1;
      }
    }
    std::vector<char> live(w.allocations.size() + 1, 0);
    for (const WorkloadAllocation& a : w.allocations) live[a.id] = a.persistent;
    if (!wraps) {
      for (size_t i = 0; i < from; ++i) {
        if (w.step[i].kind == StepEvent::Kind::kAlloc) live[w.step[i].alloc_id] = 1;
        if (w.step[i].kind == StepEvent::Kind::kFree) live[w.step[i].alloc_id] = 0;
      }
    }
    for (const ChunkRange& c : w.step[to].launch.accesses) {
      if (live[c.alloc_id] && !changes[c.alloc_id]) out.step[from].launch.accesses.push_back(c);
    }
  }
  return out;
}

// The schedule for `options.rules` as they are (no host placement is tried), with RunBelady's
// victim choice for `knobs.idle_horizon`, the loads of `knobs.early` decided early and
// `knobs.held` room held free. `guard_cuts`, when given, counts the measured step's evictions that
// a launch taking early loads, or held room, pulled before kRecentUseGuard launches after the
// victim's last use.
absl::StatusOr<PolicyFile> PlanSchedule(const Workload& w, const PlanOptions& options,
                                        const Knobs& knobs, uint64_t* guard_cuts = nullptr) {
  const EarlyLoads& early = knobs.early;
  if (options.sim.device_memory < kChunkBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("device memory ", options.sim.device_memory, " is less than one 2 MiB chunk"));
  }
  const uint64_t cap = options.sim.capacity_bytes();  // whole 4 KiB pages
  PolicyFile policy;
  policy.model = w.name;
  policy.fingerprint = WorkloadFingerprint(w);
  policy.launches = w.num_launches();
  policy.allocations = w.allocations.size();
  const StepSignature signature = ComputeStepSignature(w);
  policy.step_signature = signature.signature;
  policy.step_events = signature.events;
  policy.persistent = signature.persistent;
  policy.budget_bytes = cap;
  policy.rules = options.rules;

  // Host-placed and untouched allocations take no device room: leave them out of the replay by
  // giving the planner a workload without their accesses.
  Workload managed = w;
  for (StepEvent& e : managed.step) {
    if (e.kind != StepEvent::Kind::kLaunch) continue;
    auto& acc = e.launch.accesses;
    acc.erase(std::remove_if(acc.begin(), acc.end(),
                             [&](const ChunkRange& c) {
                               const RuleAction a = policy.ActionFor(w.allocation(c.alloc_id));
                               return a == RuleAction::kHost || a == RuleAction::kNever;
                             }),
              acc.end());
  }
  // The replay points into the workload it is built from (ReplayItem::launch): keep that alive.
  const Workload with_early = WithEarlyLoads(managed, early);
  const Replay r = BuildReplay(with_early);
  const uint64_t n = r.launches_per_step;
  const std::vector<uint64_t> reserve = ReserveFor(knobs.held, n);
  const BeladyRun run = RunBelady(r, cap, knobs.idle_horizon, reserve, knobs.dead_weight);
  std::vector<char> takes_early(n, 0);  // launches that take later launches' loads
  for (const auto& [position, launches] : early) {
    if (const std::optional<size_t> from = EarlyFrom(position, launches, n)) takes_early[*from] = 1;
  }
  if (guard_cuts != nullptr) *guard_cuts = 0;

  std::vector<uint64_t> alloc_pos(w.allocations.size() + 1, 0);
  for (const ReplayItem& item : r.items) {
    if (item.step == 0 && item.kind == StepEvent::Kind::kAlloc) {
      alloc_pos[item.alloc_id] = item.position;
    }
  }
  // Device memory by the launch position it is free from (earliest first).
  FreeRoom<uint64_t> room(cap);
  std::vector<uint64_t> evicted_at(r.total_chunks, 0);
  // (global issue position, move, chunk) for the measured step's decisions.
  std::map<uint64_t, std::vector<std::pair<Move, uint32_t>>> moves;
  for (const BeladyEvent& e : run.events) {
    switch (e.kind) {
      case BeladyEvent::Kind::kFree:
        room.Give(e.global, r.footprint[e.chunk]);
        break;
      case BeladyEvent::Kind::kEvict: {
        if (e.overcommit) {
          // After a launch larger than the device (right after it): the room it makes was never
          // taken (the launch's loads past the budget are not scheduled), and it may not be there.
          evicted_at[e.chunk] = e.global;
          if (e.step == kMeasuredStep) moves[e.global].push_back({Move::kEvictAbsent, e.chunk});
          break;
        }
        // Not before the kRecentUseGuard launches after its last use have been issued, unless
        // its room is needed sooner.
        const uint64_t issue = std::min(e.last_use + 1 + kRecentUseGuard, e.global);
        if (guard_cuts != nullptr && e.step == kMeasuredStep &&
            (takes_early[e.global % n] || e.held) && issue < e.last_use + 1 + kRecentUseGuard) {
          ++*guard_cuts;
        }
        evicted_at[e.chunk] = issue;
        // Room held free is taken again only at the next step's first launch.
        room.Give(e.held ? (e.global / n + 1) * n : issue, r.footprint[e.chunk]);
        if (e.step == kMeasuredStep) {
          moves[issue].push_back({e.dead ? Move::kDiscard : Move::kEvict, e.chunk});
        }
        break;
      }
      case BeladyEvent::Kind::kLoad: {
        // A load past the budget (a launch larger than the device) is not scheduled: the device
        // pages the chunk in while the kernel runs.
        if (e.overcommit) break;
        uint64_t issue = room.Take(r.footprint[e.chunk]);
        issue = std::max(issue, evicted_at[e.chunk] + 1);
        if (e.fresh) issue = std::max(issue, e.step * n + alloc_pos[r.owner[e.chunk]]);
        issue = std::min(issue, e.global);
        if (e.step == kMeasuredStep) {
          moves[issue].push_back({e.fresh ? Move::kPopulate : Move::kPrefetch, e.chunk});
        }
        break;
      }
    }
  }
  // Fold global issue positions onto the step (earlier steps' positions wrap around), and close
  // the step over its own repetition: Belady's run is not periodic (schedule_closure.h).
  FoldedSchedule folded(n);
  for (auto& [global, list] : moves) {
    std::sort(list.begin(), list.end(),
              [](const auto& a, const auto& b) { return a.second < b.second; });
    for (const auto& [move, chunk] : list) folded[global % n].push_back(ChunkMove{move, chunk});
  }
  std::vector<char> excluded(r.total_chunks, 0);  // paged in and out by a launch past the budget
  for (const BeladyEvent& e : run.events) {
    if (e.step == kMeasuredStep && e.overcommit) excluded[e.chunk] = 1;
  }
  std::vector<uint64_t> budget(n, cap);
  for (size_t q = 0; q < reserve.size() && q < n; ++q) {
    budget[q] = cap > reserve[q] + kChunkBytes ? cap - reserve[q] : kChunkBytes;
  }
  CloseSchedule(r, cap, budget, excluded, kRecentUseGuard, &folded);
  std::map<uint32_t, ScheduleEntry> entries;
  for (uint32_t position = 0; position < n; ++position) {
    const std::vector<ChunkMove>& list = folded[position];
    if (list.empty()) continue;
    ScheduleEntry& entry = entries[position];
    entry.position = position;
    for (const auto& [move, chunk] : list) {
      switch (move) {
        case Move::kEvict:
          AppendChunk(entry.evict, r, chunk);
          break;
        case Move::kEvictAbsent:
          AppendChunk(entry.evict_absent, r, chunk);
          break;
        case Move::kDiscard:
          AppendChunk(entry.discard, r, chunk);
          break;
        case Move::kPrefetch:
          AppendChunk(entry.prefetch, r, chunk);
          break;
        case Move::kPopulate:
          AppendChunk(entry.populate, r, chunk);
          break;
      }
    }
  }
  for (auto& [position, entry] : entries) policy.schedule.push_back(std::move(entry));
  for (PolicyRule& rule : PinRules(managed, r, run)) policy.rules.push_back(rule);
  return policy;
}

// Host rules for the persistent allocations made at call site `site`, by allocation order (one
// rule per run of consecutive ids): the engine knows an allocation's order in a run but not its
// call site, so a rule by order is one it can execute (docs/policy.md, "Rules").
std::vector<PolicyRule> HostRulesFor(const Workload& w, const std::string& site) {
  std::vector<uint64_t> ids;
  for (const WorkloadAllocation& a : w.allocations) {
    if (a.persistent && a.call_site == site) ids.push_back(a.id);
  }
  std::sort(ids.begin(), ids.end());
  std::vector<PolicyRule> rules;
  for (const uint64_t id : ids) {
    if (!rules.empty() && rules.back().last_order + 1 == id) {
      rules.back().last_order = id;
      continue;
    }
    PolicyRule rule;
    rule.first_order = id;
    rule.last_order = id;
    rule.action = RuleAction::kHost;
    rules.push_back(rule);
  }
  return rules;
}

// A plan and what it was planned with, its simulated step time, and the step time of the engine
// following it once that has been needed.
struct Candidate {
  Knobs knobs;
  PolicyFile plan;
  double seconds = 0;
  std::optional<double> engine_seconds;
};

// The search PlanPolicy makes from Belady's plan: each stage replaces a candidate with a plan that
// is better (Better) and, where the gain comes from timing, that the engine following it agrees
// is faster (EngineFaster).
class PlanSearch {
 public:
  PlanSearch(const Workload& w, const PlanOptions& options, const SimResult& belady)
      : w_(w),
        options_(options),
        belady_(belady),
        n_(w.num_launches()),
        max_bytes_(kMaxExtraBytes *
                   static_cast<double>(std::min(belady.bytes_moved(),
                                                BeladyBytesWritingDeadDataBack(w, options.sim)))) {}

  // Time-aware victims, from the longest horizon (closest to Belady's choices, fewest bytes) to
  // the shortest: where the step alternates between phases bound by different copy engines (a
  // forward pass waiting for copies back, a backward pass waiting for loads), evicting what has
  // been unused longest lets the copies back start in the other phase.
  absl::Status TimeAwareVictims(Candidate& best) {
    for (uint64_t eighths = 7; eighths >= 1; --eighths) {
      Knobs trial = best.knobs;
      trial.idle_horizon = n_ * eighths / 8;
      if (trial.idle_horizon == 0) continue;
      if (!Spend()) break;
      absl::StatusOr<PolicyFile> plan = PlanSchedule(w_, options_, trial);
      if (!plan.ok()) return plan.status();
      const SimResult result = SimulatePlanned(w_, *plan, options_.sim);
      if (!Better(best, result)) continue;
      Candidate candidate{trial, *std::move(plan), result.step_seconds, std::nullopt};
      if (EngineFaster(best, candidate)) best = std::move(candidate);
    }
    return absl::OkStatus();
  }

  // Room held free at the step's end: where the step's first launches allocate faster than the
  // copy engine back to the host can make room (a forward pass filling the device with fresh
  // activations), sending out more of the next step's late data while the step before ends (a
  // backward pass, whose copy engine back is idle) leaves that room free for them. Tries
  // kHeldStarts start positions, evenly spaced, with each of kHeldChunks held, with `best`'s
  // victims and with Belady's; then every start between its neighbours for the fastest of those;
  // and returns the fastest plan that is better, in the simulation and with the engine following
  // it (of the kHeldEngineTries fastest); nullopt when none is.
  absl::StatusOr<std::optional<Candidate>> HeldRoomFor(Candidate& best) {
    constexpr uint64_t kHeldStarts = 16;
    constexpr uint32_t kHeldChunks[] = {2, 4, 6, 8, 12, 16};
    constexpr size_t kHeldEngineTries = 4;
    const uint64_t cap = options_.sim.device_memory;
    const uint64_t starts = std::min(n_, kHeldStarts);
    std::vector<Candidate> picks;
    auto try_held = [&](const Knobs& trial) -> absl::Status {
      if (!Spend()) return absl::OkStatus();
      uint64_t guard_cuts = 0;
      absl::StatusOr<PolicyFile> plan = PlanSchedule(w_, options_, trial, &guard_cuts);
      if (!plan.ok()) return plan.status();
      // Held room may not evict what a kernel just used (kRecentUseGuard).
      if (guard_cuts != 0) return absl::OkStatus();
      const SimResult result = SimulatePlanned(w_, *plan, options_.sim);
      if (!Better(best, result)) return absl::OkStatus();
      picks.push_back({trial, *std::move(plan), result.step_seconds, std::nullopt});
      return absl::OkStatus();
    };
    std::vector<uint64_t> horizons = {best.knobs.idle_horizon};
    if (best.knobs.idle_horizon != 0) horizons.push_back(0);
    for (const uint64_t horizon : horizons) {
      for (uint64_t i = 0; i < starts; ++i) {
        for (const uint32_t chunks : kHeldChunks) {
          if (2 * uint64_t{chunks} * kChunkBytes >= cap) continue;
          Knobs trial = best.knobs;
          trial.idle_horizon = horizon;
          trial.held = HeldRoom{static_cast<uint32_t>(i * n_ / starts), chunks};
          if (absl::Status s = try_held(trial); !s.ok()) return s;
        }
      }
    }
    const auto by_seconds = [](const Candidate& a, const Candidate& b) {
      return a.seconds < b.seconds;
    };
    if (!picks.empty() && starts < n_) {
      // The fastest of the evenly spaced starts.
      const Knobs around = std::min_element(picks.begin(), picks.end(), by_seconds)->knobs;
      const uint64_t spacing = (n_ + starts - 1) / starts;
      const uint64_t first = around.held.from > spacing ? around.held.from - spacing : 0;
      const uint64_t last = std::min<uint64_t>(n_ - 1, around.held.from + spacing);
      for (uint64_t from = first; from <= last; ++from) {
        if (from == around.held.from) continue;
        Knobs trial = around;
        trial.held.from = static_cast<uint32_t>(from);
        if (absl::Status s = try_held(trial); !s.ok()) return s;
      }
    }
    std::stable_sort(picks.begin(), picks.end(), by_seconds);
    if (picks.size() > kHeldEngineTries) picks.resize(kHeldEngineTries);
    for (Candidate& pick : picks) {
      if (EngineFaster(best, pick)) return std::optional<Candidate>(std::move(pick));
    }
    return std::optional<Candidate>();
  }

  // Early loads: where the room for a launch's data is made only by the launch just before it
  // (its victims used there), deciding its loads a few launches earlier makes Belady free room
  // sooner, at the cost of a few more bytes. Greedy: each round tries each launch's loads 1 to
  // kMaxEarly launches early, the launches that wait longest in the simulated step first (then
  // the rest in order: the launch that takes the room another one waits for need not wait
  // itself), all of them in a step of up to kEarlyScanLaunches launches and kEarlyTrials plans
  // in a longer one, and keeps the fastest plan that is better.
  absl::Status EarlyLoadsFor(Candidate& best) {
    constexpr int kEarlyRounds = 8;
    constexpr uint32_t kMaxEarly = 3;
    constexpr uint64_t kEarlyScanLaunches = 128;
    const int kEarlyTrials = n_ <= kEarlyScanLaunches ? static_cast<int>(n_ * kMaxEarly) : 96;
    for (int round = 0; round < kEarlyRounds && !cut_; ++round) {
      std::vector<double> stalls;
      SimulatePlanned(w_, best.plan, options_.sim, &stalls);
      std::vector<uint32_t> targets(stalls.size());
      for (uint32_t p = 0; p < targets.size(); ++p) targets[p] = p;
      std::stable_sort(targets.begin(), targets.end(),
                       [&](uint32_t a, uint32_t b) { return stalls[a] > stalls[b]; });
      std::optional<Candidate> pick;
      int trials = 0;
      for (const uint32_t target : targets) {
        for (uint32_t launches = 1; launches <= kMaxEarly && launches < n_; ++launches) {
          if (trials == kEarlyTrials) break;
          const EarlyLoads& early = best.knobs.early;
          if (early.contains(target) && early.at(target) >= launches) continue;
          if (!Spend()) break;
          ++trials;
          Knobs trial = best.knobs;
          trial.early[target] = launches;
          uint64_t guard_cuts = 0;
          absl::StatusOr<PolicyFile> plan = PlanSchedule(w_, options_, trial, &guard_cuts);
          if (!plan.ok()) return plan.status();
          // An early load may not evict what a kernel just used (kRecentUseGuard).
          if (guard_cuts != 0) continue;
          const SimResult result = SimulatePlanned(w_, *plan, options_.sim);
          if (!Better(best, result) || (pick && result.step_seconds >= pick->seconds)) continue;
          pick = Candidate{std::move(trial), *std::move(plan), result.step_seconds, std::nullopt};
        }
      }
      if (!pick || !EngineFaster(best, *pick)) break;
      best = *std::move(pick);
    }
    return absl::OkStatus();
  }

  // Host placement, one call site's persistent allocations at a time (kept when better).
  uint64_t searched() const { return searched_; }
  bool cut() const { return cut_; }

  absl::Status HostPlacement(Candidate& best) {
    std::vector<std::string> sites;
    for (const WorkloadAllocation& a : w_.allocations) {
      if (a.persistent && !a.call_site.empty() &&
          std::find(sites.begin(), sites.end(), a.call_site) == sites.end()) {
        sites.push_back(a.call_site);
      }
    }
    PlanOptions trial = options_;
    for (const std::string& site : sites) {
      if (!Spend()) break;
      const std::vector<PolicyRule> host = HostRulesFor(w_, site);
      trial.rules.insert(trial.rules.end(), host.begin(), host.end());
      absl::StatusOr<PolicyFile> plan = PlanSchedule(w_, trial, best.knobs);
      if (!plan.ok()) return plan.status();
      const SimResult result = SimulatePlanned(w_, *plan, options_.sim);
      if (Better(best, result)) {
        best.seconds = result.step_seconds;
        best.plan = *std::move(plan);
        best.engine_seconds.reset();
      } else {
        trial.rules.resize(trial.rules.size() - host.size());
      }
    }
    return absl::OkStatus();
  }

 private:
  // The chunk-level bound's bytes with its dead data written back, as the engine does.
  static uint64_t BeladyBytesWritingDeadDataBack(const Workload& w, const SimOptions& o) {
    const SimResult bound = ChunkLowerBound(w, o);
    return bound.bytes_moved() + bound.discarded_bytes;
  }

  // A plan replaces `best` when its simulated step takes under kFaster of `best`'s, it moves at
  // most kMaxExtraBytes times the bytes of the plan the search starts from or of the chunk-level
  // bound (its dead data written back), whichever is fewer, and it leaves no more to demand faults
  // than Belady's (a schedule folded from a replay whose steps decide differently can miss a
  // chunk).
  static constexpr double kFaster = 0.99;
  static constexpr double kMaxExtraBytes = 1.1;

  // Counts one more candidate's simulation; false (and nothing counted) when the bound on the
  // searches (PlanOptions::max_search_launches) leaves no room for it.
  bool Spend() {
    const uint64_t bound = options_.max_search_launches;
    if (bound != 0 && searched_ + n_ > bound) {
      cut_ = true;
      return false;
    }
    searched_ += n_;
    return true;
  }

  bool Better(const Candidate& best, const SimResult& result) const {
    return result.step_seconds < best.seconds * kFaster &&
           result.demand_faults <= belady_.demand_faults &&
           static_cast<double>(result.bytes_moved()) <= max_bytes_;
  }

  // A plan whose gain comes from timing is kept only when the residency engine itself, replayed
  // following it (SimulateEngineFollowing), is faster than following `best` too: there the
  // schedule's model and the engine's execution can differ. Fills in each one's engine time
  // where it is not known yet.
  bool EngineFaster(Candidate& best, Candidate& candidate) const {
    return EngineSeconds(candidate) < EngineSeconds(best) * kFaster;
  }
  double EngineSeconds(Candidate& c) const {
    if (!c.engine_seconds) {
      searched_ += n_;
      c.engine_seconds = SimulateEngineFollowing(w_, c.plan, options_.sim).step_seconds;
    }
    return *c.engine_seconds;
  }

  const Workload& w_;
  const PlanOptions& options_;
  const SimResult belady_;
  const uint64_t n_;
  const double max_bytes_;
  mutable uint64_t searched_ = 0;  // launches simulated so far (candidates, engine replays)
  bool cut_ = false;
};

}  // namespace

absl::StatusOr<PolicyFile> PlanPolicy(const Workload& w, const PlanOptions& options,
                                      PlanChoices* choices) {
  if (absl::Status s = ValidateWorkload(w); !s.ok()) return s;
  // Belady's plan, with the dead-data weight under which the engine following the plan is fastest
  // (the first of equals): the plan's own model and the engine order write-backs differently, and
  // which weight wins is decided by a few percent (docs/results/models-simgpu.md).
  std::optional<Candidate> start;
  std::optional<SimResult> belady;
  for (const double weight : kDeadWeights) {
    if (weight != kDeadFirst && !options.keep_dead_data) continue;
    Knobs knobs;
    knobs.dead_weight = weight;
    absl::StatusOr<PolicyFile> plan = PlanSchedule(w, options, knobs);
    if (!plan.ok()) return plan.status();
    const SimResult result = SimulatePlanned(w, *plan, options.sim);
    std::optional<double> engine;  // only where there is a choice
    if (options.keep_dead_data) {
      engine = SimulateEngineFollowing(w, *plan, options.sim).step_seconds;
    }
    if (start && engine && *engine >= *start->engine_seconds) continue;
    belady = result;
    start = Candidate{knobs, *std::move(plan), result.step_seconds, engine};
  }
  PlanSearch search(w, options, *belady);
  Candidate best = *std::move(start);
  if (options.time_aware_victims) {
    if (absl::Status s = search.TimeAwareVictims(best); !s.ok()) return s;
  }
  // Held room and early loads each pay bytes for time, and the first may leave the second
  // nothing to gain: early loads are searched from the plan without held room and from the
  // best one with it, and the faster result is kept.
  std::optional<Candidate> held;
  if (options.held_room) {
    absl::StatusOr<std::optional<Candidate>> found = search.HeldRoomFor(best);
    if (!found.ok()) return found.status();
    held = *std::move(found);
  }
  if (options.early_loads) {
    if (absl::Status s = search.EarlyLoadsFor(best); !s.ok()) return s;
    if (held) {
      if (absl::Status s = search.EarlyLoadsFor(*held); !s.ok()) return s;
    }
  }
  if (held && held->seconds < best.seconds) best = *std::move(held);
  if (options.place_on_host) {
    if (absl::Status s = search.HostPlacement(best); !s.ok()) return s;
  }
  if (choices != nullptr) {
    *choices = PlanChoices{best.knobs.idle_horizon,
                           best.knobs.dead_weight,
                           best.knobs.held.from,
                           best.knobs.held.chunks,
                           best.knobs.early.size(),
                           search.searched(),
                           search.cut()};
  }
  return std::move(best.plan);
}

}  // namespace spillway::policy
