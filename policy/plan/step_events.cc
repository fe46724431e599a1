// From recorded events to one training step (see step_events.h).
#include "policy/plan/step_events.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "policy/engine/residency_engine.h"
#include "policy/plan/step_signature.h"

namespace spillway::policy {

void RecordedEvents::Allocated(uint64_t id, uint64_t bytes, uint64_t call_site) {
  allocations[id] = RecordedAllocation{bytes, call_site, {}};
  RecordedEvent e;
  e.kind = StepEvent::Kind::kAlloc;
  e.alloc = id;
  e.token = AllocToken(bytes);
  events.push_back(std::move(e));
}

bool RecordedEvents::Freed(uint64_t id) {
  const auto known = allocations.find(id);
  if (known == allocations.end()) return false;
  RecordedEvent e;
  e.kind = StepEvent::Kind::kFree;
  e.alloc = id;
  e.token = FreeToken(known->second.bytes);
  events.push_back(std::move(e));
  return true;
}

void RecordedEvents::Launched(std::string kernel, uint64_t correlation,
                              const std::vector<RecordedAccess>& accesses) {
  RecordedEvent e;
  e.kernel = std::move(kernel);
  e.correlation = correlation;
  std::vector<uint64_t> sizes;  // of the distinct allocations, in parameter order
  for (const RecordedAccess& r : accesses) {
    const auto known = allocations.find(r.alloc);
    if (known == allocations.end()) continue;
    const bool seen = std::any_of(e.accesses.begin(), e.accesses.end(),
                                  [&](const RecordedAccess& x) { return x.alloc == r.alloc; });
    if (!seen) sizes.push_back(known->second.bytes);
    e.accesses.push_back(r);
    std::vector<uint64_t>& offsets = known->second.offsets;
    const auto at = std::lower_bound(offsets.begin(), offsets.end(), r.offset);
    if (at == offsets.end() || *at != r.offset) offsets.insert(at, r.offset);
  }
  e.token = LaunchToken(sizes.data(), sizes.size());
  events.push_back(std::move(e));
  ++launches_;
}

namespace {

// Where an access's range ends, in bytes. The recorder writes a pointer into an allocation as the
// range from it to the allocation's end (it cannot know the tensor's size); in an arena (at least
// ResidencyEngine::kArenaMinBytes, reached through an interior pointer) such a range ends at the
// next offset any launch's pointer was seen at (the next tensor), as the engine names it
// (docs/engine.md, "Arenas"). Every row of the simulator and the planner read these ranges.
uint64_t AccessEnd(const RecordedAllocation& t, uint64_t offset, uint64_t bytes) {
  const uint64_t end = bytes == 0 ? t.bytes : std::min(t.bytes, offset + bytes);
  const bool arena =
      t.bytes >= ResidencyEngine::kArenaMinBytes && !t.offsets.empty() && t.offsets.back() != 0;
  if (!arena || end != t.bytes) return end;
  const auto next = std::upper_bound(t.offsets.begin(), t.offsets.end(), offset);
  return next == t.offsets.end() ? end : std::min(end, *next);
}

// The longest stretch around `r` where every event repeats the one `period` earlier: [a, b).
std::pair<size_t, size_t> PeriodicRun(const std::vector<RecordedEvent>& ev, size_t r,
                                      size_t period) {
  size_t a = r, b = r;
  while (a > period && ev[a - 1].token == ev[a - 1 - period].token) --a;
  while (b < ev.size() && ev[b].token == ev[b - period].token) ++b;
  return {a, b};
}

// The kernel time of launch `i`: the least recorded for it and for the same kernel whole periods
// before and after it within the repetitions [first, end). A recorded time runs from the kernel's
// start event to its end event, so it also holds what the kernel waited for on the device (another
// stream's kernel, its own demand faults); the least over the repetitions is the closest to the
// kernel's own time. 0 when none was recorded (a recording whose kernels were timed only from
// some launch on has them in the repetitions after the step picked).
double KernelSeconds(const RecordedEvents& read, size_t i, size_t period, size_t first,
                     size_t end) {
  const std::vector<RecordedEvent>& ev = read.events;
  double best = 0;
  for (size_t j = first + (i - first) % period; j < end; j += period) {
    if (ev[j].kind == StepEvent::Kind::kLaunch && ev[j].kernel == ev[i].kernel) {
      const auto time = read.kernel_seconds.find(ev[j].correlation);
      if (time != read.kernel_seconds.end() && (best == 0 || time->second < best)) {
        best = time->second;
      }
    }
  }
  return best;
}

// Equal tokens compare sizes only. A step also uses the same allocations again each time, or ones
// made anew in place of those freed since (the learned policy's rule,
// policy/engine/learned_policy.cc): checked over the last repetition against the one before.
// Otherwise (groups of alike buffers worked on in turn, each a graph or a run of alike kernels) the
// period is only part of the step.
absl::Status SameAllocationsEachRepetition(const std::string& source,
                                           const std::vector<RecordedEvent>& ev, size_t period,
                                           size_t b) {
  std::unordered_map<uint64_t, size_t> freed_at;  // allocation -> the index of its free
  for (size_t i = 0; i < b; ++i) {
    if (ev[i].kind == StepEvent::Kind::kFree) freed_at.try_emplace(ev[i].alloc, i);
  }
  const auto freed_before = [&](uint64_t alloc, size_t i) {
    const auto it = freed_at.find(alloc);
    return it != freed_at.end() && it->second < i;
  };
  for (size_t i = b - period; i < b && i >= period; ++i) {
    const RecordedEvent& now = ev[i];
    const RecordedEvent& then = ev[i - period];
    if (now.kind != StepEvent::Kind::kLaunch) continue;
    const size_t slots = std::min(now.accesses.size(), then.accesses.size());
    for (size_t s = 0; s < slots; ++s) {
      const uint64_t was = then.accesses[s].alloc;
      if (now.accesses[s].alloc != was && !freed_before(was, i)) {
        return absl::InvalidArgumentError(absl::StrCat(
            source, ": a repetition of ", period, " events uses another live allocation at event ",
            i, " than one repetition earlier (allocation ", now.accesses[s].alloc, " for ", was,
            "): not a whole step"));
      }
    }
  }
  return absl::OkStatus();
}

// The workload of the step with `period` events whose repetitions end at event `b` (the run
// of repeats starts at `a`); an error when that step does not pair its allocations and frees.
absl::StatusOr<Workload> BuildStep(const std::string& source, const RecordedEvents& read,
                                   size_t period, size_t a, size_t b, StepPlace* place) {
  const std::vector<RecordedEvent>& ev = read.events;
  const size_t n = ev.size();
  // The repetitions cover [a - period, b). The step boundary: the fewest live
  // allocations, among the starts of the last whole repetition's rotations.
  std::vector<uint64_t> live_at(n + 1, 0);
  {
    uint64_t live = 0;
    std::unordered_map<uint64_t, bool> alive;
    for (size_t i = 0; i < n; ++i) {
      live_at[i] = live;
      if (ev[i].kind == StepEvent::Kind::kAlloc) {
        ++live;
        alive[ev[i].alloc] = true;
      } else if (ev[i].kind == StepEvent::Kind::kFree && alive[ev[i].alloc]) {
        --live;
        alive[ev[i].alloc] = false;
      }
    }
    live_at[n] = live;
  }
  if (absl::Status roles = SameAllocationsEachRepetition(source, ev, period, b); !roles.ok()) {
    return roles;
  }
  const size_t last_start = b - period;
  const size_t first_start = std::max(a - period, b >= 2 * period ? b - 2 * period : 0);
  size_t start = last_start;
  for (size_t s = last_start + 1; s-- > first_start;) {
    if (live_at[s] < live_at[start]) start = s;
  }
  // Each kernel's least recorded time over the repetitions.
  std::unordered_map<std::string, double> least_by_kernel;
  for (size_t i = a - period; i < b; ++i) {
    if (ev[i].kind != StepEvent::Kind::kLaunch) continue;
    const auto time = read.kernel_seconds.find(ev[i].correlation);
    if (time == read.kernel_seconds.end() || time->second <= 0) continue;
    auto [it, added] = least_by_kernel.try_emplace(ev[i].kernel, time->second);
    if (!added) it->second = std::min(it->second, time->second);
  }
  // Persistent: live at `start`, in allocation order.
  Workload w;
  w.name = source.substr(source.find_last_of('/') + 1);
  w.description = absl::StrCat(source, ": a step of ", period, " events");
  std::unordered_map<uint64_t, uint64_t> id_of;  // trace allocation id -> workload id
  auto add = [&](uint64_t trace_id, bool persistent) {
    const RecordedAllocation& t = read.allocations.at(trace_id);
    WorkloadAllocation a;
    a.id = w.allocations.size() + 1;
    a.bytes = t.bytes;
    a.call_site = CallSiteName(t.call_site);
    if (const auto site = read.site_modules.find(t.call_site); site != read.site_modules.end()) {
      a.modules = site->second;
    }
    a.name = absl::StrCat("allocation ", trace_id);
    a.persistent = persistent;
    w.allocations.push_back(a);
    id_of[trace_id] = a.id;
    return a.id;
  };
  {
    std::unordered_map<uint64_t, bool> alive;
    std::vector<uint64_t> order;
    for (size_t i = 0; i < start; ++i) {
      if (ev[i].kind == StepEvent::Kind::kAlloc) {
        alive[ev[i].alloc] = true;
        order.push_back(ev[i].alloc);
      } else if (ev[i].kind == StepEvent::Kind::kFree) {
        alive[ev[i].alloc] = false;
      }
    }
    for (const uint64_t id : order) {
      if (alive[id] && !id_of.contains(id)) add(id, true);
    }
  }
  for (size_t i = start; i < start + period; ++i) {
    const RecordedEvent& e = ev[i];
    StepEvent s;
    s.kind = e.kind;
    if (e.kind == StepEvent::Kind::kAlloc) {
      s.alloc_id = add(e.alloc, false);
    } else if (e.kind == StepEvent::Kind::kFree) {
      const auto found = id_of.find(e.alloc);
      if (found == id_of.end()) continue;
      s.alloc_id = found->second;
    } else {
      s.launch.kernel = e.kernel;
      s.launch.compute_seconds = KernelSeconds(read, i, period, a - period, b);
      if (s.launch.compute_seconds == 0) {
        // Never timed at this position (a device the job runs far ahead of gives some launches
        // no time): the least time of the same kernel elsewhere in the repetitions.
        const auto same = least_by_kernel.find(e.kernel);
        if (same != least_by_kernel.end()) s.launch.compute_seconds = same->second;
      }
      for (const RecordedAccess& x : e.accesses) {
        const auto found = id_of.find(x.alloc);
        if (found == id_of.end()) continue;
        const uint64_t bytes = w.allocation(found->second).bytes;
        const uint64_t offset = std::min(x.offset, bytes - 1);
        const uint64_t end = AccessEnd(read.allocations.at(x.alloc), offset, x.bytes);
        const uint64_t first = offset / kChunkBytes;
        const uint64_t last = (std::max(end, offset + 1) - 1) / kChunkBytes;
        s.launch.accesses.push_back(ChunkRange{found->second, static_cast<uint32_t>(first),
                                               static_cast<uint32_t>(last - first + 1)});
      }
    }
    w.step.push_back(std::move(s));
  }
  if (place != nullptr) *place = StepPlace{period, a - period, b, start};
  w = NumberCanonically(std::move(w));
  if (absl::Status status = CheckWorkloadSizes(w); !status.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(
        source, ": the step found (", period, " events) is too large to plan: ", status.message()));
  }
  if (absl::Status status = ValidateWorkload(w); !status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": the step found (", period,
                     " events) is not a whole training step: ", status.message()));
  }
  return w;
}

}  // namespace

namespace {
constexpr absl::string_view kNoRepeatingStep = ": no repeating training step found in its ";
}  // namespace

bool IsNoRepeatingStep(const absl::Status& status) {
  return absl::IsNotFound(status) && absl::StrContains(status.message(), kNoRepeatingStep);
}

absl::StatusOr<Workload> WorkloadFromEvents(const RecordedEvents& read, const std::string& source,
                                            StepPlace* place) {
  const std::vector<RecordedEvent>& ev = read.events;
  const size_t n = ev.size();
  // The period: the repetition covering the most events (ties: the shorter period) that makes a
  // whole step, found from candidate distances to earlier events with the same token as a few
  // reference events.
  struct Candidate {
    size_t period, a, b;
  };
  std::vector<Candidate> candidates;
  // The reference events: a few fixed positions, and before each the nearest event of the rarest
  // repeated token. Earlier events with a reference's token are tried up to 1024 back, which
  // covers two steps only if its token comes fewer than 512 times a step: a step of many alike
  // layers repeats its launches' tokens once a layer, and its own events (the loss, the
  // optimizer, the first allocation) show the step.
  std::unordered_map<uint64_t, size_t> count;
  for (const RecordedEvent& e : ev) ++count[e.token];
  std::vector<size_t> references;
  for (const size_t r : {n / 2, (2 * n) / 3, (3 * n) / 4, n > 0 ? n - 1 : 0}) {
    if (r == 0 || r >= n) continue;
    references.push_back(r);
    size_t rarest = r, rarest_count = count[ev[r].token];
    for (size_t i = r + 1; i-- > 0;) {
      const size_t c = count[ev[i].token];
      if (c >= 2 && (rarest_count < 2 || c < rarest_count)) {
        rarest = i;
        rarest_count = c;
      }
    }
    if (rarest != r && rarest != 0) references.push_back(rarest);
  }
  for (const size_t r : references) {
    size_t tried = 0;
    for (size_t j = r; j-- > 0 && tried < 1024;) {
      if (ev[j].token != ev[r].token) continue;
      ++tried;
      const size_t period = r - j;
      const auto [a, b] = PeriodicRun(ev, r, period);
      if (b - a < period) continue;  // fewer than two whole repetitions
      bool launches = false;
      for (size_t i = b - period; i < b && !launches; ++i) {
        launches = ev[i].kind == StepEvent::Kind::kLaunch;
      }
      if (launches) candidates.push_back(Candidate{period, a, b});
    }
  }
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& x, const Candidate& y) {
    if (x.b - x.a != y.b - y.a) return x.b - x.a > y.b - y.a;
    if (x.period != y.period) return x.period < y.period;
    return x.a < y.a;
  });
  candidates.erase(std::unique(candidates.begin(), candidates.end(),
                               [](const Candidate& x, const Candidate& y) {
                                 return x.period == y.period && x.a == y.a && x.b == y.b;
                               }),
                   candidates.end());
  // The best few that make a whole step (each try reads the events once). A repetition over less
  // than an eighth of the events is no training step but a run of alike events within one (a
  // stretch of alike layers, each allocating an activation and launching one kernel), which is
  // what is left where the step's own order changes from step to step.
  size_t too_short = 0, longest = 0;
  for (size_t i = 0; i < candidates.size() && i < 32; ++i) {
    const Candidate& c = candidates[i];
    if (8 * (c.b - c.a) < n) {
      ++too_short;
      longest = std::max(longest, c.b - c.a);
      continue;
    }
    absl::StatusOr<Workload> w = BuildStep(source, read, c.period, c.a, c.b, place);
    if (w.ok()) return w;
  }
  if (too_short != 0 && too_short == std::min<size_t>(candidates.size(), 32)) {
    return absl::NotFoundError(absl::StrCat(
        source, kNoRepeatingStep, n,
        " allocations, frees and launches: the longest repeating run covers only ", longest,
        " of them (does the job launch its kernels in an order that changes from step to step, "
        "as TensorFlow's executor does? spillway run's learned policy handles that without a "
        "plan)"));
  }
  return absl::NotFoundError(
      absl::StrCat(source, kNoRepeatingStep, n,
                   " allocations, frees and launches (at least two whole steps are needed)"));
}

}  // namespace spillway::policy
