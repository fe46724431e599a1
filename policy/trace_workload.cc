// Trace -> workload (see trace_workload.h): read the events, find the step's period by the
// engine's event tokens, pick the step boundary with the fewest live allocations, and build the
// workload from the last whole repetition.
#include "policy/trace_workload.h"

#include <algorithm>
#include <unordered_map>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "policy/residency_engine.h"
#include "policy/step_signature.h"
#include "profiler/trace/trace_reader.h"

namespace spillway::policy {
namespace {

struct TraceAllocation {
  uint64_t bytes = 0;
  uint64_t call_site = 0;
  std::vector<uint64_t> offsets;  // where launches' pointers into it point, sorted, distinct
};

struct Access {
  uint64_t alloc = 0;  // trace allocation id
  uint64_t offset = 0;
  uint64_t bytes = 0;  // 0: the whole allocation
};

struct Event {
  StepEvent::Kind kind = StepEvent::Kind::kLaunch;
  uint64_t alloc = 0;  // kAlloc, kFree: trace allocation id
  std::string kernel;
  uint64_t correlation = 0;
  std::vector<Access> accesses;
  uint64_t token = 0;
};

struct TraceEvents {
  std::unordered_map<uint64_t, TraceAllocation> allocations;
  // The module paths on each call site's stack, innermost first, each once.
  std::unordered_map<uint64_t, std::vector<std::string>> site_modules;
  std::vector<Event> events;
  std::unordered_map<uint64_t, double> kernel_seconds;  // by correlation id
};

absl::StatusOr<TraceEvents> ReadEvents(const std::string& path) {
  absl::StatusOr<std::unique_ptr<trace::TraceReader>> reader =
      trace::TraceReader::Open(path, trace::ReaderOptions{.allow_unterminated = true});
  if (!reader.ok()) return reader.status();
  TraceEvents out;
  std::unordered_map<uint32_t, std::string> strings;
  std::unordered_map<uint32_t, std::string> module_paths;
  std::unordered_map<uint64_t, uint64_t> live_by_address;
  trace::Record record;
  std::vector<uint64_t> sizes;
  for (;;) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    if (!more.ok()) return more.status();
    if (!*more) break;
    if (const auto* s = std::get_if<trace::StringRecord>(&record)) {
      strings[s->id] = std::string(s->text);
    } else if (const auto* m = std::get_if<trace::ModuleRecord>(&record)) {
      module_paths[m->id] = std::string(m->path);
    } else if (const auto* c = std::get_if<trace::CallSiteRecord>(&record)) {
      std::vector<std::string>& paths = out.site_modules[c->id];
      for (const trace::Frame& frame : c->frames) {
        const auto path = module_paths.find(frame.module);
        if (path != module_paths.end() &&
            std::find(paths.begin(), paths.end(), path->second) == paths.end()) {
          paths.push_back(path->second);
        }
      }
    } else if (const auto* a = std::get_if<trace::AllocRecord>(&record)) {
      if (a->kind == trace::AllocKind::kHost || a->bytes == 0) continue;
      out.allocations[a->allocation_id] = TraceAllocation{a->bytes, a->call_site, {}};
      live_by_address[a->address] = a->allocation_id;
      Event e;
      e.kind = StepEvent::Kind::kAlloc;
      e.alloc = a->allocation_id;
      e.token = AllocToken(a->bytes);
      out.events.push_back(std::move(e));
    } else if (const auto* f = std::get_if<trace::FreeRecord>(&record)) {
      uint64_t id = f->allocation_id;
      const auto by_address = live_by_address.find(f->address);
      if (id == 0 && by_address != live_by_address.end()) id = by_address->second;
      if (by_address != live_by_address.end()) live_by_address.erase(by_address);
      const auto known = out.allocations.find(id);
      if (known == out.allocations.end()) continue;
      Event e;
      e.kind = StepEvent::Kind::kFree;
      e.alloc = id;
      e.token = FreeToken(known->second.bytes);
      out.events.push_back(std::move(e));
    } else if (const auto* l = std::get_if<trace::LaunchRecord>(&record)) {
      Event e;
      const auto name = strings.find(l->function_name);
      e.kernel = name != strings.end() ? name->second : absl::StrFormat("0x%x", l->function);
      e.correlation = l->correlation_id;
      sizes.clear();
      for (const trace::AccessRecord& r : l->accesses) {
        const auto known = out.allocations.find(r.allocation_id);
        if (known == out.allocations.end()) continue;
        const bool seen = std::any_of(e.accesses.begin(), e.accesses.end(),
                                      [&](const Access& x) { return x.alloc == r.allocation_id; });
        if (!seen) sizes.push_back(known->second.bytes);
        e.accesses.push_back(Access{r.allocation_id, r.offset, r.bytes});
        std::vector<uint64_t>& offsets = known->second.offsets;
        const auto at = std::lower_bound(offsets.begin(), offsets.end(), r.offset);
        if (at == offsets.end() || *at != r.offset) offsets.insert(at, r.offset);
      }
      e.token = LaunchToken(sizes.data(), sizes.size());
      out.events.push_back(std::move(e));
    } else if (const auto* k = std::get_if<trace::KernelTimeRecord>(&record)) {
      if (k->activity == trace::Activity::kKernel && k->end_ns > k->start_ns) {
        out.kernel_seconds[k->correlation_id] = static_cast<double>(k->end_ns - k->start_ns) * 1e-9;
      }
    }
  }
  return out;
}

// Where an access's range ends, in bytes. The recorder writes a pointer into an allocation as the
// range from it to the allocation's end (it cannot know the tensor's size); in an arena (at least
// ResidencyEngine::kArenaMinBytes, reached through an interior pointer) such a range ends at the
// next offset any launch's pointer was seen at (the next tensor), as the engine names it
// (docs/engine.md, "Arenas"). Every row of the simulator and the planner read these ranges.
uint64_t AccessEnd(const TraceAllocation& t, uint64_t offset, uint64_t bytes) {
  const uint64_t end = bytes == 0 ? t.bytes : std::min(t.bytes, offset + bytes);
  const bool arena =
      t.bytes >= ResidencyEngine::kArenaMinBytes && !t.offsets.empty() && t.offsets.back() != 0;
  if (!arena || end != t.bytes) return end;
  const auto next = std::upper_bound(t.offsets.begin(), t.offsets.end(), offset);
  return next == t.offsets.end() ? end : std::min(end, *next);
}

// The longest stretch around `r` where every event repeats the one `period` earlier: [a, b).
std::pair<size_t, size_t> PeriodicRun(const std::vector<Event>& ev, size_t r, size_t period) {
  size_t a = r, b = r;
  while (a > period && ev[a - 1].token == ev[a - 1 - period].token) --a;
  while (b < ev.size() && ev[b].token == ev[b - period].token) ++b;
  return {a, b};
}

// The kernel time of launch `i`: the least recorded for it and for the same kernel one, two, ...
// periods earlier (back to event `first`). A recorded time runs from the kernel's start event to
// its end event, so it also holds what the kernel waited for on the device (another stream's
// kernel, its own demand faults); the least over the repetitions is the closest to the kernel's
// own time. 0 when none was recorded.
double KernelSeconds(const TraceEvents& read, size_t i, size_t period, size_t first) {
  const std::vector<Event>& ev = read.events;
  double best = 0;
  for (size_t j = i;; j -= period) {
    if (ev[j].kind == StepEvent::Kind::kLaunch && ev[j].kernel == ev[i].kernel) {
      const auto time = read.kernel_seconds.find(ev[j].correlation);
      if (time != read.kernel_seconds.end() && (best == 0 || time->second < best)) {
        best = time->second;
      }
    }
    if (j < first + period) break;
  }
  return best;
}

// The workload of the step with `period` events whose repetitions end at event `b` (the run
// of repeats starts at `a`); an error when that step does not pair its allocations and frees.
absl::StatusOr<Workload> BuildStep(const std::string& path, const TraceEvents& read, size_t period,
                                   size_t a, size_t b) {
  const std::vector<Event>& ev = read.events;
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
  const size_t last_start = b - period;
  const size_t first_start = std::max(a - period, b >= 2 * period ? b - 2 * period : 0);
  size_t start = last_start;
  for (size_t s = last_start + 1; s-- > first_start;) {
    if (live_at[s] < live_at[start]) start = s;
  }
  // Persistent: live at `start`, in allocation order.
  Workload w;
  w.name = path.substr(path.find_last_of('/') + 1);
  w.description = absl::StrCat("recorded trace ", path, ": a step of ", period, " events");
  std::unordered_map<uint64_t, uint64_t> id_of;  // trace allocation id -> workload id
  auto add = [&](uint64_t trace_id, bool persistent) {
    const TraceAllocation& t = read.allocations.at(trace_id);
    WorkloadAllocation a;
    a.id = w.allocations.size() + 1;
    a.bytes = t.bytes;
    a.call_site = CallSiteName(t.call_site);
    if (const auto site = read.site_modules.find(t.call_site); site != read.site_modules.end()) {
      a.modules = site->second;
    }
    a.name = absl::StrCat("trace allocation ", trace_id);
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
    const Event& e = ev[i];
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
      s.launch.compute_seconds = KernelSeconds(read, i, period, a - period);
      for (const Access& x : e.accesses) {
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
  w = NumberCanonically(std::move(w));
  if (absl::Status status = ValidateWorkload(w); !status.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": the step found (", period,
                     " events) is not a whole training step: ", status.message()));
  }
  return w;
}

}  // namespace

absl::StatusOr<Workload> WorkloadFromTrace(const std::string& path) {
  absl::StatusOr<TraceEvents> read = ReadEvents(path);
  if (!read.ok()) return read.status();
  const auto& ev = read->events;  // (`Event` alone: also device.h's)
  const size_t n = ev.size();
  // The period: the repetition covering the most events (ties: the shorter period) that makes a
  // whole step, found from candidate distances to earlier events with the same token as a few
  // reference events.
  struct Candidate {
    size_t period, a, b;
  };
  std::vector<Candidate> candidates;
  for (const size_t r : {n / 2, (2 * n) / 3, (3 * n) / 4, n > 0 ? n - 1 : 0}) {
    if (r == 0 || r >= n) continue;
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
    return x.period < y.period;
  });
  // The best few that make a whole step (each try reads the events once).
  for (size_t i = 0; i < candidates.size() && i < 32; ++i) {
    const Candidate& c = candidates[i];
    absl::StatusOr<Workload> w = BuildStep(path, *read, c.period, c.a, c.b);
    if (w.ok()) return w;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(path, ": no repeating training step found in its ", n,
                   " allocations, frees and launches (record at least two whole steps)"));
}

}  // namespace spillway::policy
