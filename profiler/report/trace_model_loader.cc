// LoadTraceModel (trace_model_loader.h): streams a trace through the profiler's reader
// (profiler/trace/trace_reader.h) into a TraceModel. Records of different threads arrive in
// buffer-sized pieces, so allocations, launches and copies are put in time order first; then
// frees are paired with their allocations (by allocation id, else by address), kernel times with
// launches and copies by correlation id, and UVM counters with the allocation that held their
// address at the time.
#include "profiler/report/trace_model_loader.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <variant>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "profiler/trace/trace_reader.h"

namespace spillway::report {
namespace {

namespace trace = ::spillway::trace;

constexpr uint32_t kUnknownSite = std::numeric_limits<uint32_t>::max();

AllocKind ModelKind(trace::AllocKind kind) {
  switch (kind) {
    case trace::AllocKind::kDevice:
      return AllocKind::kDevice;
    case trace::AllocKind::kManaged:
      return AllocKind::kManaged;
    case trace::AllocKind::kAsync:
      return AllocKind::kAsync;
    case trace::AllocKind::kHost:
      return AllocKind::kHost;
    case trace::AllocKind::kOther:
      return AllocKind::kOther;
  }
  return AllocKind::kOther;
}

// What is collected while reading, before pairing.
struct Pending {
  std::vector<trace::FreeRecord> frees;
  std::vector<uint64_t> launch_correlation;  // parallel to model.launches before sorting
  std::vector<uint64_t> copy_correlation;    // parallel to model.copies before sorting
  std::vector<trace::KernelTimeRecord> times;
  std::vector<trace::UvmCounterRecord> uvm;
  std::vector<std::pair<uint64_t, uint64_t>> function_of_launch;  // (string id, handle)
  std::vector<bool> graph_launch;  // parallel to function_of_launch: the handle is a graph exec
  absl::flat_hash_map<trace::ModuleId, uint32_t> module_index;
  absl::flat_hash_map<trace::CallSiteId, uint32_t> site_index;
  std::vector<trace::CallSiteId> alloc_site;  // parallel to model.allocations before sorting
  absl::flat_hash_map<trace::StringId, std::string> strings;
};

class Builder {
 public:
  explicit Builder(TraceModel& model) : model_(model) {}

  void operator()(const trace::HeaderRecord&) {}
  void operator()(const trace::StringRecord& r) { p_.strings[r.id] = std::string(r.text); }
  void operator()(const trace::ModuleRecord& r) {
    p_.module_index[r.id] = static_cast<uint32_t>(model_.modules.size());
    model_.modules.push_back({std::string(r.build_id), std::string(r.path)});
  }
  void operator()(const trace::CallSiteRecord& r) {
    CallSite site;
    site.id = r.id;
    for (const trace::Frame& f : r.frames) {
      auto it = p_.module_index.find(f.module);
      site.frames.push_back(
          {it == p_.module_index.end() ? std::numeric_limits<uint32_t>::max() : it->second,
           f.offset, ""});
    }
    p_.site_index.try_emplace(r.id, static_cast<uint32_t>(model_.sites.size()));
    model_.sites.push_back(std::move(site));
  }
  void operator()(const trace::AllocRecord& r) {
    Allocation a;
    a.id = r.allocation_id;
    a.address = r.address;
    a.bytes = r.bytes;
    a.kind = ModelKind(r.kind);
    a.stream = r.stream;
    a.alloc_ns = r.time_ns;
    model_.allocations.push_back(a);
    p_.alloc_site.push_back(r.call_site);
  }
  void operator()(const trace::FreeRecord& r) { p_.frees.push_back(r); }
  void operator()(const trace::LaunchRecord& r) {
    AddLaunch(r, r.function_name, r.function, false);
  }
  // A graph launch is one launch of "graph 0x<exec>" touching what its kernel nodes can (none in
  // a 1.0 trace), as the engine sees it.
  void operator()(const trace::GraphLaunchRecord& r) { AddLaunch(r, 0, r.graph_exec, true); }
  void operator()(const trace::MemcpyRecord& r) {
    Copy c;
    c.kind = Copy::Kind::kMemcpy;
    c.time_ns = r.time_ns;
    c.stream = r.stream;
    c.bytes = r.bytes;
    c.direction = trace::CopyDirectionName(r.direction);
    model_.copies.push_back(std::move(c));
    p_.copy_correlation.push_back(r.correlation_id);
  }
  void operator()(const trace::MemsetRecord& r) {
    Copy c;
    c.kind = Copy::Kind::kMemset;
    c.time_ns = r.time_ns;
    c.stream = r.stream;
    c.bytes = r.bytes;
    model_.copies.push_back(std::move(c));
    p_.copy_correlation.push_back(r.correlation_id);
  }
  void operator()(const trace::SynchronizeRecord&) { ++model_.synchronizations; }
  void operator()(const trace::ModuleLoadRecord&) {}
  void operator()(const trace::KernelTimeRecord& r) { p_.times.push_back(r); }
  void operator()(const trace::UvmCounterRecord& r) { p_.uvm.push_back(r); }
  void operator()(const trace::ResidentRecord& r) {
    model_.resident.push_back({r.time_ns, r.bytes});
  }
  void operator()(const trace::EndRecord&) {}

  // A launch record or a graph launch record, named by string `name_id` or `handle`.
  template <typename RecordT>
  void AddLaunch(const RecordT& r, uint64_t name_id, uint64_t handle, bool graph) {
    Launch l;
    l.time_ns = r.time_ns;
    l.stream = r.stream;
    l.thread = r.thread;
    for (const trace::AccessRecord& a : r.accesses) {
      l.accesses.push_back({a.allocation_id, a.offset, a.bytes});
    }
    model_.launches.push_back(std::move(l));
    p_.launch_correlation.push_back(r.correlation_id);
    p_.function_of_launch.emplace_back(name_id, handle);
    p_.graph_launch.push_back(graph);
  }

  void Finish() {
    AssignSitesAndSortAllocations();
    PairFrees();
    NameFunctionsAndSortLaunches();
    SortCopiesAndTime();
    AttributeUvm();
    std::stable_sort(model_.resident.begin(), model_.resident.end(),
                     [](const auto& a, const auto& b) { return a.time_ns < b.time_ns; });
  }

 private:
  // Indices 0..n-1 in time order (stable: one thread's records keep their order at equal times).
  template <typename T, typename TimeOf>
  static std::vector<size_t> TimeOrder(const std::vector<T>& items, TimeOf time_of) {
    std::vector<size_t> order(items.size());
    for (size_t i = 0; i < order.size(); ++i) order[i] = i;
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return time_of(items[a]) < time_of(items[b]); });
    return order;
  }
  template <typename T>
  static std::vector<T> Permute(std::vector<T>& items, const std::vector<size_t>& order) {
    std::vector<T> out;
    out.reserve(items.size());
    for (size_t i : order) out.push_back(std::move(items[i]));
    return out;
  }

  void AssignSitesAndSortAllocations() {
    for (size_t i = 0; i < model_.allocations.size(); ++i) {
      auto it = p_.site_index.find(p_.alloc_site[i]);
      model_.allocations[i].site = it == p_.site_index.end() ? kUnknownSite : it->second;
    }
    // Unknown sites get the index one past the last site, which the analysis reads as unknown.
    for (Allocation& a : model_.allocations) {
      if (a.site == kUnknownSite) a.site = static_cast<uint32_t>(model_.sites.size());
    }
    const auto order =
        TimeOrder(model_.allocations, [](const Allocation& a) { return a.alloc_ns; });
    model_.allocations = Permute(model_.allocations, order);
  }

  // Frees in time order end the allocation with their id (else the live one at their address).
  void PairFrees() {
    std::stable_sort(p_.frees.begin(), p_.frees.end(),
                     [](const auto& a, const auto& b) { return a.time_ns < b.time_ns; });
    absl::flat_hash_map<uint64_t, size_t> by_id;
    for (size_t i = 0; i < model_.allocations.size(); ++i) {
      if (model_.allocations[i].id != 0) by_id.try_emplace(model_.allocations[i].id, i);
    }
    // Allocations by address in time order, to pair frees that carry no id.
    absl::flat_hash_map<uint64_t, std::vector<size_t>> by_address;
    for (size_t i = 0; i < model_.allocations.size(); ++i) {
      by_address[model_.allocations[i].address].push_back(i);
    }
    for (const trace::FreeRecord& f : p_.frees) {
      size_t index = model_.allocations.size();
      if (auto it = by_id.find(f.allocation_id); f.allocation_id != 0 && it != by_id.end()) {
        index = it->second;
      } else if (auto at = by_address.find(f.address); at != by_address.end()) {
        for (size_t i : at->second) {  // the latest allocation there, before the free, still live
          const Allocation& a = model_.allocations[i];
          if (a.alloc_ns <= f.time_ns && a.free_ns == kNoTime) index = i;
        }
      }
      if (index < model_.allocations.size() && model_.allocations[index].free_ns == kNoTime) {
        model_.allocations[index].free_ns = std::max(f.time_ns, model_.allocations[index].alloc_ns);
      }
    }
  }

  void NameFunctionsAndSortLaunches() {
    absl::flat_hash_map<std::string, uint32_t> function_index;
    for (size_t i = 0; i < model_.launches.size(); ++i) {
      const auto [name_id, handle] = p_.function_of_launch[i];
      std::string name;
      if (p_.graph_launch[i]) {
        name = absl::StrCat("graph 0x", absl::Hex(handle));
      } else if (auto it = p_.strings.find(static_cast<trace::StringId>(name_id));
                 name_id != 0 && it != p_.strings.end()) {
        name = it->second;
      } else {
        name = absl::StrCat("function 0x", absl::Hex(handle));
      }
      auto [it, inserted] =
          function_index.try_emplace(name, static_cast<uint32_t>(model_.functions.size()));
      if (inserted) model_.functions.push_back(name);
      model_.launches[i].function = it->second;
    }
    const auto order = TimeOrder(model_.launches, [](const Launch& l) { return l.time_ns; });
    model_.launches = Permute(model_.launches, order);
    p_.launch_correlation = Permute(p_.launch_correlation, order);
  }

  void SortCopiesAndTime() {
    const auto order = TimeOrder(model_.copies, [](const Copy& c) { return c.time_ns; });
    model_.copies = Permute(model_.copies, order);
    p_.copy_correlation = Permute(p_.copy_correlation, order);
    absl::flat_hash_map<uint64_t, size_t> launch_of, copy_of;
    for (size_t i = 0; i < p_.launch_correlation.size(); ++i) {
      if (p_.launch_correlation[i] != 0) launch_of.try_emplace(p_.launch_correlation[i], i);
    }
    for (size_t i = 0; i < p_.copy_correlation.size(); ++i) {
      if (p_.copy_correlation[i] != 0) copy_of.try_emplace(p_.copy_correlation[i], i);
    }
    for (const trace::KernelTimeRecord& t : p_.times) {
      if (t.end_ns < t.start_ns) continue;
      if (t.activity == trace::Activity::kKernel) {
        if (auto it = launch_of.find(t.correlation_id); it != launch_of.end()) {
          // Several records for one launch (a graph's kernel nodes, timed by CUPTI under the
          // graph launch's correlation id): from the first start to the last end.
          Launch& l = model_.launches[it->second];
          if (l.kernel_start_ns == kNoTime || t.start_ns < l.kernel_start_ns) {
            l.kernel_start_ns = t.start_ns;
          }
          if (l.kernel_end_ns == kNoTime || t.end_ns > l.kernel_end_ns) l.kernel_end_ns = t.end_ns;
        }
      } else if (auto it = copy_of.find(t.correlation_id); it != copy_of.end()) {
        model_.copies[it->second].end_ns = t.end_ns;
      }
    }
  }

  // The allocation holding a counter's address at its time: by address, latest first.
  void AttributeUvm() {
    std::vector<size_t> by_address(model_.allocations.size());
    for (size_t i = 0; i < by_address.size(); ++i) by_address[i] = i;
    std::stable_sort(by_address.begin(), by_address.end(), [&](size_t a, size_t b) {
      return model_.allocations[a].address < model_.allocations[b].address;
    });
    for (const trace::UvmCounterRecord& u : p_.uvm) {
      UvmEvent e;
      switch (u.kind) {
        case trace::UvmKind::kGpuPageFault:
        case trace::UvmKind::kCpuPageFault:
          e.kind = UvmEvent::Kind::kFault;
          break;
        case trace::UvmKind::kMigrateToDevice:
          e.kind = UvmEvent::Kind::kMigrateToDevice;
          break;
        case trace::UvmKind::kMigrateToHost:
          e.kind = UvmEvent::Kind::kMigrateToHost;
          break;
        case trace::UvmKind::kThrashing:
          e.kind = UvmEvent::Kind::kThrashing;
          break;
        case trace::UvmKind::kThrottling:
        case trace::UvmKind::kRemoteMap:
          continue;  // not shown in the report
      }
      e.time_ns = u.start_ns;
      e.bytes = u.bytes;
      e.count = u.count;
      auto it = std::upper_bound(
          by_address.begin(), by_address.end(), u.address,
          [&](uint64_t address, size_t i) { return address < model_.allocations[i].address; });
      // Walk back over allocations starting at or below the address (a few, in practice).
      for (int steps = 0; it != by_address.begin() && steps < 64; ++steps) {
        const Allocation& a = model_.allocations[*--it];
        if (u.address - a.address < a.bytes && a.alloc_ns <= u.start_ns &&
            (a.free_ns == kNoTime || u.start_ns <= a.free_ns)) {
          e.alloc_id = a.id;
          break;
        }
      }
      model_.uvm.push_back(e);
    }
    std::stable_sort(model_.uvm.begin(), model_.uvm.end(),
                     [](const auto& a, const auto& b) { return a.time_ns < b.time_ns; });
  }

  TraceModel& model_;
  Pending p_;
};

}  // namespace

absl::StatusOr<TraceModel> LoadTraceModel(const std::string& path, const LoadProgress& progress) {
  absl::StatusOr<std::unique_ptr<trace::TraceReader>> reader = trace::TraceReader::Open(path);
  if (!reader.ok()) return reader.status();
  TraceModel model;
  const trace::HeaderRecord& h = (*reader)->header();
  model.header.job = std::string(h.job);
  model.header.device = std::string(h.device_name);
  model.header.cuda_version = std::string(h.cuda_version);
  model.header.driver_version = std::string(h.driver_version);
  model.header.spillway_version = std::string(h.spillway_version);
  model.header.device_memory_bytes = h.device_memory_bytes;
  model.header.start_ns = h.start_ns;
  Builder builder(model);
  trace::Record record;
  uint64_t next_progress = 0;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    if (!more.ok()) return more.status();
    if (!*more) break;
    std::visit(builder, record);
    if (progress && (*reader)->offset() >= next_progress) {
      progress((*reader)->offset(), (*reader)->size());
      next_progress = (*reader)->offset() + (1u << 20);
    }
  }
  model.header.dropped_records = (*reader)->end().records_dropped;
  model.header.end_ns = (*reader)->end().end_ns;
  builder.Finish();
  if (progress) progress((*reader)->size(), (*reader)->size());
  return model;
}

}  // namespace spillway::report
