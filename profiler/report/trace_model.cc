// Small helpers of the in-memory trace model.
#include "profiler/report/trace_model.h"

#include <algorithm>

namespace spillway::report {

uint64_t TraceModel::EndTime() const {
  if (header.end_ns != 0) return header.end_ns;
  uint64_t end = header.start_ns;
  const auto later = [&end](uint64_t t) {
    if (t != kNoTime) end = std::max(end, t);
  };
  for (const Allocation& a : allocations) {
    later(a.alloc_ns);
    later(a.free_ns);
  }
  for (const Launch& l : launches) {
    later(l.time_ns);
    later(l.kernel_end_ns);
  }
  for (const Copy& c : copies) {
    later(c.time_ns);
    later(c.end_ns);
  }
  for (const UvmEvent& u : uvm) later(u.time_ns);
  for (const ResidentSample& r : resident) later(r.time_ns);
  return end;
}

}  // namespace spillway::report
