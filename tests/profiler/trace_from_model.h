// Writes a TraceModel as a trace file through the TraceWriter, the way the recorder would: one
// module, call-site and string definition per distinct item, alloc and free records, launches
// with correlated kernel times, copies, UVM counters at their allocation's address, resident
// samples and synchronizations. Times are shifted so the model's last event lies just before
// now (the end record carries the real close time); the shift is returned. The loader tests read
// the trace back and compare with the model.
#ifndef SPILLWAY_TESTS_PROFILER_TRACE_FROM_MODEL_H_
#define SPILLWAY_TESTS_PROFILER_TRACE_FROM_MODEL_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "profiler/report/trace_model.h"
#include "profiler/trace/trace_writer.h"

namespace spillway::report::testing {

inline absl::StatusOr<uint64_t> WriteModelAsTrace(const TraceModel& m, const std::string& path) {
  namespace trace = ::spillway::trace;
  const uint64_t now = trace::TraceClockNs(), end = m.EndTime();
  const uint64_t shift = now > end ? now - end : 0;
  const auto at = [shift](uint64_t t) { return t + shift; };
  trace::HeaderRecord h;
  h.job = m.header.job;
  h.device_name = m.header.device;
  h.cuda_version = m.header.cuda_version;
  h.driver_version = m.header.driver_version;
  h.spillway_version = m.header.spillway_version;
  h.device_memory_bytes = m.header.device_memory_bytes;
  h.start_ns = at(m.header.start_ns);
  h.pid = 4242;
  trace::WriterOptions options;
  options.flush = trace::WriterOptions::Flush::kInline;
  auto writer = trace::TraceWriter::Open(path, h, options);
  if (!writer.ok()) return writer.status();
  trace::TraceWriter& w = **writer;

  std::vector<trace::ModuleId> modules;
  for (const Module& mod : m.modules) modules.push_back(w.InternModule(mod.build_id, mod.path));
  std::vector<trace::CallSiteId> sites;
  for (const CallSite& site : m.sites) {
    std::vector<trace::Frame> frames;
    for (const Frame& f : site.frames) frames.push_back({modules[f.module], f.offset});
    sites.push_back(w.InternCallSite(frames));
  }
  std::vector<trace::StringId> functions;
  for (const std::string& f : m.functions) functions.push_back(w.InternString(f));

  absl::flat_hash_map<uint64_t, uint64_t> address_of;
  for (const Allocation& a : m.allocations) {
    address_of[a.id] = a.address;
    trace::AllocRecord r;
    r.time_ns = at(a.alloc_ns);
    r.thread = 1;
    r.kind = static_cast<trace::AllocKind>(a.kind);
    r.address = a.address;
    r.bytes = a.bytes;
    r.stream = a.stream;
    r.call_site = a.site < sites.size() ? sites[a.site] : 0;
    r.allocation_id = a.id;
    w.Write(r);
  }
  // Frees after all allocations: the loader orders by time, whatever the file order.
  for (const Allocation& a : m.allocations) {
    if (a.free_ns == kNoTime) continue;
    w.Write(trace::FreeRecord{at(a.free_ns), 2, a.address, a.id, 0});
  }
  uint64_t correlation = 0;
  for (const Launch& l : m.launches) {
    std::vector<trace::AccessRecord> accesses;
    for (const Access& a : l.accesses) accesses.push_back({a.alloc_id, a.offset, a.bytes});
    trace::LaunchRecord r;
    r.time_ns = at(l.time_ns);
    r.thread = 1;
    r.stream = l.stream;
    r.function = 0x1000 + l.function;
    r.function_name = functions[l.function];
    r.correlation_id = ++correlation;
    r.accesses = accesses;
    w.Write(r);
    if (l.kernel_start_ns != kNoTime) {
      trace::KernelTimeRecord t;
      t.correlation_id = correlation;
      t.start_ns = at(l.kernel_start_ns);
      t.end_ns = at(l.kernel_end_ns);
      t.stream = l.stream;
      t.source = trace::KernelTimeRecord::kEvents;
      w.Write(t);
    }
  }
  for (const Copy& c : m.copies) {
    ++correlation;
    if (c.kind == Copy::Kind::kMemcpy) {
      trace::MemcpyRecord r;
      r.time_ns = at(c.time_ns);
      r.direction = c.direction == "HtoD"   ? trace::CopyDirection::kHostToDevice
                    : c.direction == "DtoH" ? trace::CopyDirection::kDeviceToHost
                                            : trace::CopyDirection::kDeviceToDevice;
      r.bytes = c.bytes;
      r.stream = c.stream;
      r.correlation_id = correlation;
      w.Write(r);
    } else {
      trace::MemsetRecord r;
      r.time_ns = at(c.time_ns);
      r.bytes = c.bytes;
      r.stream = c.stream;
      r.correlation_id = correlation;
      w.Write(r);
    }
    if (c.end_ns != kNoTime) {
      w.Write(trace::KernelTimeRecord{
          correlation, at(c.time_ns), at(c.end_ns), 0, c.stream,
          c.kind == Copy::Kind::kMemcpy ? trace::Activity::kMemcpy : trace::Activity::kMemset});
    }
  }
  for (const UvmEvent& u : m.uvm) {
    trace::UvmCounterRecord r;
    r.kind = u.kind == UvmEvent::Kind::kFault             ? trace::UvmKind::kGpuPageFault
             : u.kind == UvmEvent::Kind::kMigrateToDevice ? trace::UvmKind::kMigrateToDevice
             : u.kind == UvmEvent::Kind::kMigrateToHost   ? trace::UvmKind::kMigrateToHost
                                                          : trace::UvmKind::kThrashing;
    r.start_ns = at(u.time_ns);
    r.address = address_of.contains(u.alloc_id) ? address_of[u.alloc_id] + 4096 : 1;
    r.bytes = u.bytes;
    r.count = u.count;
    w.Write(r);
  }
  for (const ResidentSample& s : m.resident) w.Write(trace::ResidentRecord{at(s.time_ns), s.bytes});
  for (uint64_t i = 0; i < m.synchronizations; ++i) {
    w.Write(trace::SynchronizeRecord{at(m.header.start_ns + i), at(m.header.start_ns + i + 1), 1,
                                     trace::SyncWhat::kContext, 0});
  }
  if (absl::Status s = w.Close(); !s.ok()) return s;
  return shift;
}

}  // namespace spillway::report::testing

#endif  // SPILLWAY_TESTS_PROFILER_TRACE_FROM_MODEL_H_
