// An in-memory model of a recorded trace, as the report and the Perfetto export see it:
// allocations with their lifetimes and call sites, launches with their access sets and kernel
// times, copies, UVM activity and the header. Filled from a trace file by trace_model_loader or
// directly by tests; the analysis (trace_analysis.h) only reads it.
#ifndef SPILLWAY_PROFILER_REPORT_TRACE_MODEL_H_
#define SPILLWAY_PROFILER_REPORT_TRACE_MODEL_H_

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "profiler/trace/trace_records.h"

namespace spillway::report {

// A time that was never recorded (an allocation never freed, a kernel with no timing).
inline constexpr uint64_t kNoTime = std::numeric_limits<uint64_t>::max();

struct TraceHeader {
  std::string job;  // the command line or program name
  std::string device;
  std::string cuda_version;
  std::string driver_version;
  std::string spillway_version;
  uint64_t device_memory_bytes = 0;  // 0 = unknown
  uint64_t dropped_records = 0;
  uint64_t start_ns = 0;  // times in the model are nanoseconds on this clock
  uint64_t end_ns = 0;    // 0 = derive from the events
};

// A loaded module: frames point into it by build-id.
struct Module {
  std::string build_id;  // hex
  std::string path;      // where it was loaded from in the recorded run
};

// One frame of a call-site stack: an offset into a module, symbolized when that was possible.
struct Frame {
  uint32_t module = 0;  // index into TraceModel::modules
  uint64_t offset = 0;
  std::string symbol;  // "function (file:line)"; empty until symbolized
};

// A de-duplicated call-site stack, innermost frame first.
struct CallSite {
  std::vector<Frame> frames;
  uint64_t id = 0;  // the trace's call-site id (what a policy rule's call_site names)
};

// The trace's allocation kinds (profiler/trace/trace_records.h), and their names.
using trace::AllocKind;
using trace::AllocKindName;

struct Allocation {
  uint64_t id = 0;  // unique in the trace
  uint64_t address = 0;
  uint64_t bytes = 0;
  AllocKind kind = AllocKind::kDevice;
  uint64_t stream = 0;
  uint32_t site = 0;  // index into TraceModel::sites
  uint64_t alloc_ns = 0;
  uint64_t free_ns = kNoTime;
};

// The part of one allocation a launch touches.
struct Access {
  uint64_t alloc_id = 0;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

struct Launch {
  uint64_t time_ns = 0;  // when the host launched it
  uint64_t stream = 0;
  uint32_t function = 0;  // index into TraceModel::functions
  std::vector<Access> accesses;
  uint64_t kernel_start_ns = kNoTime;  // device-side execution, when recorded
  uint64_t kernel_end_ns = kNoTime;
  uint32_t thread = 0;  // the launching thread, as the trace numbers threads
};

struct Copy {
  enum class Kind { kMemcpy, kMemset };
  Kind kind = Kind::kMemcpy;
  uint64_t time_ns = 0;
  uint64_t end_ns = kNoTime;
  uint64_t stream = 0;
  uint64_t bytes = 0;
  std::string direction;  // "HtoD", "DtoH", "DtoD", ... ("" for memsets)
};

// A unified-memory counter record, attributed to the allocation it hit.
struct UvmEvent {
  enum class Kind { kFault, kMigrateToDevice, kMigrateToHost, kThrashing };
  Kind kind = Kind::kFault;
  uint64_t time_ns = 0;
  uint64_t alloc_id = 0;  // 0 = not inside any known allocation
  uint64_t bytes = 0;
  uint64_t count = 1;
};

// Managed memory resident on the device at a time, when the recorder sampled it.
struct ResidentSample {
  uint64_t time_ns = 0;
  uint64_t bytes = 0;
};

struct TraceModel {
  TraceHeader header;
  std::vector<Module> modules;
  std::vector<CallSite> sites;
  std::vector<std::string> functions;
  std::vector<Allocation> allocations;  // in allocation order
  std::vector<Launch> launches;         // in launch order
  std::vector<Copy> copies;
  std::vector<UvmEvent> uvm;
  std::vector<ResidentSample> resident;
  uint64_t synchronizations = 0;

  // The last time any event happened (header.end_ns when set).
  uint64_t EndTime() const;
};

}  // namespace spillway::report

#endif  // SPILLWAY_PROFILER_REPORT_TRACE_MODEL_H_
