// Trace -> ReplayTrace (replay_trace.h): one pass over the records in file order (the recorder
// writes from one thread), allocations tracked by id (or address, for a free with no id), then
// the kernel times joined to their launches by correlation id.
#include "workloads/replay/replay_trace.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>
#include <variant>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "absl/types/span.h"
#include "profiler/trace/trace_reader.h"
#include "workloads/replay/replay_kernel_abi.h"

namespace spillway::replay {
namespace {

struct LiveAllocation {
  TensorRef tensor;
  uint64_t id = 0;
  uint64_t bytes = 0;
  uint64_t address = 0;
};

struct RangeMode {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint8_t mode = 0;
};

// `ranges` (of one allocation, possibly overlapping) as disjoint ranges in offset order, each
// with the union of the modes of the ranges covering it; neighbours with one mode are joined.
std::vector<RangeMode> Disjoint(const std::vector<RangeMode>& ranges) {
  std::vector<uint64_t> cuts;
  for (const RangeMode& r : ranges) {
    cuts.push_back(r.begin);
    cuts.push_back(r.end);
  }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  std::vector<RangeMode> out;
  for (size_t i = 0; i + 1 < cuts.size(); ++i) {
    uint8_t mode = 0;
    for (const RangeMode& r : ranges) {
      if (r.begin <= cuts[i] && cuts[i + 1] <= r.end) mode |= r.mode;
    }
    if (mode == 0) continue;
    if (!out.empty() && out.back().end == cuts[i] && out.back().mode == mode) {
      out.back().end = cuts[i + 1];
    } else {
      out.push_back({cuts[i], cuts[i + 1], mode});
    }
  }
  return out;
}

class TraceLoader {
 public:
  explicit TraceLoader(std::string path) { trace_.path = std::move(path); }

  absl::StatusOr<ReplayTrace> Load() {
    absl::StatusOr<std::unique_ptr<trace::TraceReader>> reader =
        trace::TraceReader::Open(trace_.path);
    if (!reader.ok()) return reader.status();
    trace::Record record;
    for (;;) {
      absl::StatusOr<bool> more = (*reader)->Next(&record);
      if (!more.ok()) return more.status();
      if (!*more) break;
      const uint64_t number = (*reader)->records_read();
      absl::Status status = std::visit([&](const auto& r) { return On(r, number); }, record);
      if (!status.ok()) return status;
    }
    return Finish();
  }

 private:
  absl::Status On(const trace::StringRecord& r, uint64_t) {
    strings_[r.id] = std::string(r.text);
    return absl::OkStatus();
  }
  absl::Status On(const trace::AllocRecord& r, uint64_t number) {
    if (r.kind == trace::AllocKind::kHost || r.bytes == 0) return absl::OkStatus();
    if (r.bytes > spillway_replay::kMaxTensorOffset) {
      return Error(number, absl::StrCat("allocation ", r.allocation_id, " of ", r.bytes,
                                        " bytes is larger than the replayer takes (1 TiB)"));
    }
    if (live_.contains(r.allocation_id)) {
      return Error(number,
                   absl::StrCat("allocation ", r.allocation_id, " is made again while live"));
    }
    ReplayEvent event;
    event.kind = ReplayEvent::Kind::kAlloc;
    event.record = number;
    event.allocation_id = r.allocation_id;
    event.bytes = r.bytes;
    event.tensor = {static_cast<uint32_t>(trace_.steps.size()), current_.allocations++};
    live_[r.allocation_id] = {event.tensor, r.allocation_id, r.bytes, r.address};
    by_address_[r.address] = r.allocation_id;
    live_bytes_ += r.bytes;
    trace_.peak_live_bytes = std::max(trace_.peak_live_bytes, live_bytes_);
    current_.events.push_back(std::move(event));
    return absl::OkStatus();
  }
  absl::Status On(const trace::FreeRecord& r, uint64_t number) {
    uint64_t id = r.allocation_id;
    if (id == 0) {
      const auto found = by_address_.find(r.address);
      if (found == by_address_.end()) {
        return Error(number, absl::StrCat("free of address 0x", absl::Hex(r.address),
                                          ", where nothing is live"));
      }
      id = found->second;
    }
    const auto found = live_.find(id);
    if (found == live_.end()) return Error(number, absl::StrCat("free of ", NotLive(id)));
    ReplayEvent event;
    event.kind = ReplayEvent::Kind::kFree;
    event.record = number;
    event.allocation_id = id;
    event.tensor = found->second.tensor;
    live_bytes_ -= found->second.bytes;
    by_address_.erase(found->second.address);
    live_.erase(found);
    freed_at_[id] = number;
    current_.events.push_back(std::move(event));
    return absl::OkStatus();
  }
  absl::Status On(const trace::LaunchRecord& r, uint64_t number) {
    ReplayEvent event;
    event.kind = ReplayEvent::Kind::kLaunch;
    event.record = number;
    event.name = Name(r.function_name);
    // The reader checked there are none or one per access, each at most kMaxAccessMode.
    const absl::Span<const uint8_t> modes = r.access_modes;
    // Each allocation's ranges, allocations in the order first touched.
    std::vector<std::pair<const LiveAllocation*, std::vector<RangeMode>>> by_tensor;
    for (size_t i = 0; i < r.accesses.size(); ++i) {
      const trace::AccessRecord& a = r.accesses[i];
      const auto found = live_.find(a.allocation_id);
      if (found == live_.end()) {
        return Error(number, absl::StrCat("launch of '", trace_.names[event.name], "' touches ",
                                          NotLive(a.allocation_id)));
      }
      const LiveAllocation& live = found->second;
      const uint64_t bytes = a.bytes == 0 ? live.bytes - std::min(a.offset, live.bytes) : a.bytes;
      if (a.offset >= live.bytes || bytes > live.bytes - a.offset) {
        return Error(number, absl::StrCat("launch of '", trace_.names[event.name], "' touches ",
                                          a.bytes, " bytes at offset ", a.offset, " of allocation ",
                                          a.allocation_id, ", which has ", live.bytes));
      }
      uint8_t mode = modes.empty() ? uint8_t{trace::kAccessUnknown} : modes[i];
      if (mode != trace::kAccessUnknown) trace_.has_modes = true;
      if (mode == trace::kAccessUnknown) mode = trace::kAccessReadWrite;
      auto entry = std::find_if(by_tensor.begin(), by_tensor.end(),
                                [&](const auto& e) { return e.first == &live; });
      if (entry == by_tensor.end()) {
        by_tensor.push_back({&live, {}});
        entry = by_tensor.end() - 1;
      }
      entry->second.push_back({a.offset, a.offset + bytes, mode});
    }
    for (const auto& [live, ranges] : by_tensor) {
      for (const RangeMode& range : Disjoint(ranges)) {
        event.accesses.push_back(
            {live->tensor, live->id, range.begin, range.end - range.begin, range.mode});
      }
    }
    launches_.push_back({static_cast<uint32_t>(trace_.steps.size()),
                         static_cast<uint32_t>(current_.events.size()), r.correlation_id});
    current_.launches++;
    current_.events.push_back(std::move(event));
    return absl::OkStatus();
  }
  absl::Status On(const trace::KernelTimeRecord& r, uint64_t) {
    if (r.activity != trace::Activity::kKernel || r.end_ns <= r.start_ns) return absl::OkStatus();
    // Several records for one correlation id: from the first start to the last end.
    auto [it, first] = spans_.try_emplace(r.correlation_id, r.start_ns, r.end_ns);
    if (!first) {
      it->second.first = std::min(it->second.first, r.start_ns);
      it->second.second = std::max(it->second.second, r.end_ns);
    }
    return absl::OkStatus();
  }
  absl::Status On(const trace::SynchronizeRecord& r, uint64_t) {
    if (r.what != trace::SyncWhat::kContext) {
      trace_.ignored_records++;
      return absl::OkStatus();
    }
    trace_.steps.push_back(std::move(current_));
    current_ = ReplayStep();
    return absl::OkStatus();
  }
  absl::Status On(const trace::MemcpyRecord&, uint64_t) { return Ignored(); }
  absl::Status On(const trace::MemsetRecord&, uint64_t) { return Ignored(); }
  absl::Status On(const trace::GraphLaunchRecord&, uint64_t) { return Ignored(); }
  template <typename Other>
  absl::Status On(const Other&, uint64_t) {
    return absl::OkStatus();
  }

  absl::Status Ignored() {
    trace_.ignored_records++;
    return absl::OkStatus();
  }

  absl::StatusOr<ReplayTrace> Finish() {
    if (trace_.steps.empty()) {
      return absl::InvalidArgumentError(absl::StrCat(
          trace_.path,
          ": no context synchronize record, so no training step to replay (the recorder ends "
          "each step with one)"));
    }
    trace_.trailing_events = current_.events.size();
    for (const LaunchAt& at : launches_) {
      if (at.step >= trace_.steps.size()) continue;  // after the last synchronize
      ReplayStep& step = trace_.steps[at.step];
      const auto span = spans_.find(at.correlation);
      if (at.correlation == 0 || span == spans_.end()) {
        trace_.untimed_launches++;
        continue;
      }
      const uint64_t ns = span->second.second - span->second.first;
      step.events[at.event].time_ns = ns;
      step.time_ns += ns;
    }
    trace_.first_is_prologue = trace_.steps.front().launches == 0;
    if (trace_.recorded_steps() == 0) {
      return absl::InvalidArgumentError(
          absl::StrCat(trace_.path, ": no launch before the last context synchronize"));
    }
    return std::move(trace_);
  }

  uint32_t Name(trace::StringId id) {
    const auto found = strings_.find(id);
    const std::string name = found == strings_.end() ? "" : found->second;
    const auto [it, inserted] = name_index_.try_emplace(name, trace_.names.size());
    if (inserted) trace_.names.push_back(name);
    return it->second;
  }

  std::string NotLive(uint64_t id) const {
    const auto freed = freed_at_.find(id);
    if (freed != freed_at_.end()) {
      return absl::StrCat("allocation ", id, ", which is not live (freed at record ", freed->second,
                          ")");
    }
    return absl::StrCat("allocation ", id, ", which is not live (never allocated)");
  }

  absl::Status Error(uint64_t record, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(trace_.path, ": record ", record, ": ", what));
  }

  struct LaunchAt {
    uint32_t step;
    uint32_t event;
    uint64_t correlation;
  };

  ReplayTrace trace_;
  ReplayStep current_;
  uint64_t live_bytes_ = 0;
  absl::flat_hash_map<uint64_t, LiveAllocation> live_;  // by allocation id
  absl::flat_hash_map<uint64_t, uint64_t> by_address_;  // address -> live allocation id
  absl::flat_hash_map<uint64_t, uint64_t> freed_at_;    // allocation id -> record number
  absl::flat_hash_map<uint32_t, std::string> strings_;
  absl::flat_hash_map<std::string, uint32_t> name_index_;
  absl::flat_hash_map<uint64_t, std::pair<uint64_t, uint64_t>> spans_;  // correlation -> times
  std::vector<LaunchAt> launches_;
};

// A reference of step `step` as the structure comparison sees it: made by the step itself or by
// the one before at a place, or an older allocation by its own place.
struct RelativeRef {
  int kind;  // 0 this step, 1 the step before, 2 older
  TensorRef ref;
  friend bool operator==(const RelativeRef&, const RelativeRef&) = default;
};

RelativeRef Relative(TensorRef ref, uint32_t step) {
  if (ref.step == step) return {0, {0, ref.index}};
  if (ref.step + 1 == step) return {1, {0, ref.index}};
  return {2, ref};
}

const char* KindName(ReplayEvent::Kind kind) {
  switch (kind) {
    case ReplayEvent::Kind::kAlloc:
      return "allocation";
    case ReplayEvent::Kind::kFree:
      return "free";
    case ReplayEvent::Kind::kLaunch:
      return "launch";
  }
  return "event";
}

}  // namespace

absl::StatusOr<ReplayTrace> ReadReplayTrace(const std::string& path) {
  return TraceLoader(path).Load();
}

std::string StepDifference(const ReplayTrace& trace, uint32_t a, uint32_t b) {
  const ReplayStep& x = trace.steps[a];
  const ReplayStep& y = trace.steps[b];
  const size_t common = std::min(x.events.size(), y.events.size());
  for (size_t i = 0; i < common; ++i) {
    const ReplayEvent& e = x.events[i];
    const ReplayEvent& f = y.events[i];
    const std::string where =
        absl::StrCat("event ", i + 1, " (records ", e.record, " and ", f.record, ")");
    if (e.kind != f.kind) {
      return absl::StrCat(where, " is a ", KindName(e.kind), " in one and a ", KindName(f.kind),
                          " in the other");
    }
    switch (e.kind) {
      case ReplayEvent::Kind::kAlloc:
        if (e.bytes != f.bytes) {
          return absl::StrCat(where, " allocates ", e.bytes, " bytes in one and ", f.bytes,
                              " in the other");
        }
        break;
      case ReplayEvent::Kind::kFree:
        if (!(Relative(e.tensor, a) == Relative(f.tensor, b))) {
          return absl::StrCat(where, " frees allocations made at different places");
        }
        break;
      case ReplayEvent::Kind::kLaunch: {
        if (e.name != f.name) {
          return absl::StrCat(where, " launches '", trace.names[e.name], "' in one and '",
                              trace.names[f.name], "' in the other");
        }
        bool same = e.accesses.size() == f.accesses.size();
        for (size_t k = 0; same && k < e.accesses.size(); ++k) {
          const ReplayAccess& p = e.accesses[k];
          const ReplayAccess& q = f.accesses[k];
          same = Relative(p.tensor, a) == Relative(q.tensor, b) && p.offset == q.offset &&
                 p.bytes == q.bytes && p.mode == q.mode;
        }
        if (!same) {
          return absl::StrCat(where, " launches '", trace.names[e.name],
                              "' with different accesses");
        }
        break;
      }
    }
  }
  if (x.events.size() != y.events.size()) {
    return absl::StrCat("one has ", x.events.size(), " allocations, frees and launches, the other ",
                        y.events.size());
  }
  return "";
}

}  // namespace spillway::replay
