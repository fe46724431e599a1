// Trace -> workload (see trace_workload.h): the trace's records as recorded events, then the step
// finder of policy/plan/step_events.h.
#include "policy/planner/trace_workload.h"

#include <algorithm>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <variant>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "policy/plan/step_events.h"
#include "profiler/trace/trace_reader.h"

namespace spillway::policy {
namespace {

// The trace's events; `launch_threads` gets how many threads launched kernels, `dropped` how
// many records the recorder dropped (its end record's count). The trace must be whole (end record
// included: one cut short is an error, as in every tool) and its allocations no larger than a
// workload's (kMaxAllocationBytes).
absl::StatusOr<RecordedEvents> ReadEvents(const std::string& path, size_t* launch_threads,
                                          uint64_t* dropped) {
  absl::StatusOr<std::unique_ptr<trace::TraceReader>> reader = trace::TraceReader::Open(path);
  if (!reader.ok()) return reader.status();
  RecordedEvents out;
  std::unordered_map<uint32_t, std::string> strings;
  std::unordered_map<uint32_t, std::string> module_paths;
  std::unordered_map<uint64_t, uint64_t> live_by_address;
  std::unordered_set<uint32_t> threads;
  std::unordered_map<uint64_t, std::pair<uint64_t, uint64_t>> spans;  // correlation -> kernel time
  trace::Record record;
  std::vector<RecordedAccess> accesses;
  // A launch record or a graph launch record, as one launch named `kernel`.
  const auto launched = [&](std::string kernel, const auto& r) {
    threads.insert(r.thread);
    accesses.clear();
    for (const trace::AccessRecord& a : r.accesses) {
      accesses.push_back(RecordedAccess{a.allocation_id, a.offset, a.bytes});
    }
    out.Launched(std::move(kernel), r.correlation_id, accesses);
  };
  for (;;) {
    const uint64_t at = (*reader)->offset();
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
      if (a->bytes > kMaxAllocationBytes) {
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": alloc record at byte ", at, ": allocation ", a->allocation_id,
                         " of ", a->bytes, " bytes is more than the 1 TiB a workload's may be"));
      }
      out.Allocated(a->allocation_id, a->bytes, a->call_site);
      live_by_address[a->address] = a->allocation_id;
    } else if (const auto* f = std::get_if<trace::FreeRecord>(&record)) {
      uint64_t id = f->allocation_id;
      const auto by_address = live_by_address.find(f->address);
      if (id == 0 && by_address != live_by_address.end()) id = by_address->second;
      if (by_address != live_by_address.end()) live_by_address.erase(by_address);
      out.Freed(id);
    } else if (const auto* l = std::get_if<trace::LaunchRecord>(&record)) {
      const auto name = strings.find(l->function_name);
      launched(name != strings.end() ? name->second : absl::StrFormat("0x%x", l->function), *l);
    } else if (const auto* g = std::get_if<trace::GraphLaunchRecord>(&record)) {
      // One launch touching what the graph's kernel nodes can (none in a 1.0 trace), as the
      // engine decides for it.
      launched(absl::StrFormat("graph 0x%x", g->graph_exec), *g);
    } else if (const auto* k = std::get_if<trace::KernelTimeRecord>(&record)) {
      if (k->activity == trace::Activity::kKernel && k->end_ns > k->start_ns) {
        // Several records for one launch (a graph's kernel nodes, timed by CUPTI under the graph
        // launch's correlation id): from the first start to the last end.
        auto [it, first] = spans.try_emplace(k->correlation_id, k->start_ns, k->end_ns);
        if (!first) {
          it->second.first = std::min(it->second.first, k->start_ns);
          it->second.second = std::max(it->second.second, k->end_ns);
        }
      }
    }
  }
  for (const auto& [correlation, span] : spans) {
    out.kernel_seconds[correlation] = static_cast<double>(span.second - span.first) * 1e-9;
  }
  *launch_threads = threads.size();
  *dropped = (*reader)->end().records_dropped;
  return out;
}

}  // namespace

absl::StatusOr<Workload> WorkloadFromTrace(const std::string& path, std::string* warning,
                                           TraceStepPlace* place) {
  size_t launch_threads = 0;
  uint64_t dropped = 0;
  absl::StatusOr<RecordedEvents> read = ReadEvents(path, &launch_threads, &dropped);
  if (!read.ok()) return read.status();
  if (warning != nullptr) {
    *warning = dropped == 0 ? ""
                            : absl::StrCat(path, ": the recorder dropped ", dropped,
                                           " records (it could not keep up); the step found "
                                           "may lack allocations, frees or launches");
  }
  StepPlace at;
  absl::StatusOr<Workload> w = WorkloadFromEvents(*read, path, &at);
  if (w.ok() && place != nullptr) {
    // From events to launches: the whole steps are the periods of the repetitions aligned to the
    // boundary picked.
    const std::vector<RecordedEvent>& ev = read->events;
    const size_t p = at.events_per_step;
    const size_t first_step = at.first + (at.start - at.first) % p;
    *place = TraceStepPlace{};
    place->events_per_step = p;
    place->steps = (at.end - first_step) / p;
    for (size_t i = 0; i < first_step + p && i < ev.size(); ++i) {
      if (ev[i].kind != StepEvent::Kind::kLaunch) continue;
      if (i < first_step) {
        ++place->first_launch;
      } else {
        ++place->launches_per_step;
      }
    }
  }
  if (w.ok()) {
    w->description = absl::StrCat("recorded trace ", w->description);
  } else if (launch_threads > 1) {
    return absl::Status(
        w.status().code(),
        absl::StrCat(w.status().message(), "; its launches came from ", launch_threads,
                     " threads: threads that launch at once interleave differently every step, "
                     "and a plan needs one repeating sequence (under `spillway run` the learned "
                     "policy follows each thread's own step instead)"));
  }
  return w;
}

}  // namespace spillway::policy
