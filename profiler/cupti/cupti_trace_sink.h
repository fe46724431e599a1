// CuptiTraceSink: the CUPTI recorder's sink that writes what it delivers to a spillway trace.
// Record mode uses it as it is (kernel, memcpy and memset times and UVM counters, the launches
// themselves come from the hooks); the injection library, which has no hooks, also asks for a
// launch record per kernel and for the driver's allocations and frees.
#ifndef SPILLWAY_PROFILER_CUPTI_CUPTI_TRACE_SINK_H_
#define SPILLWAY_PROFILER_CUPTI_CUPTI_TRACE_SINK_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "profiler/cupti/cupti_recorder.h"
#include "profiler/trace/trace_writer.h"

namespace spillway::cupti {

class CuptiTraceSink : public CuptiSink {
 public:
  struct Options {
    // Before each kernel's time, a LaunchRecord from CUPTI's view of it: name, grid, block,
    // shared memory, CUPTI's stream id, at the kernel's start, with the kernel's correlation id.
    bool write_launches = false;
    // MEMORY2 allocations and releases as AllocRecord / FreeRecord (ids of the sink's own; a
    // release is paired with the last allocation at its address).
    bool write_memory = false;
  };

  // REQUIRES: `writer` outlives the sink.
  CuptiTraceSink(trace::TraceWriter* writer, Options options);

  void OnKernelTime(const trace::KernelTimeRecord& record, const KernelDetails* details) override;
  void OnUvmCounter(const trace::UvmCounterRecord& record) override;
  void OnMemory(const MemoryEvent& event) override;

 private:
  trace::StringId NameId(const char* name);

  trace::TraceWriter* writer_;
  Options options_;
  // Only CUPTI's buffer thread touches these (the sink is never called concurrently).
  absl::flat_hash_map<std::string, trace::StringId> names_;
  absl::flat_hash_map<uint64_t, uint64_t> live_;  // address -> allocation id
  uint64_t next_allocation_id_ = 0;
};

}  // namespace spillway::cupti

#endif  // SPILLWAY_PROFILER_CUPTI_CUPTI_TRACE_SINK_H_
