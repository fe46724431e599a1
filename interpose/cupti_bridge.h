// Record mode's link to the CUPTI recorder (profiler/cupti/), kept apart from the shim's own
// sources because cupti.h cannot share a translation unit with the internal-API cuda.h the hooks
// use. Without CUPTI in the build (SPILLWAY_HAVE_CUPTI unset) every function here does nothing.
#ifndef SPILLWAY_INTERPOSE_CUPTI_BRIDGE_H_
#define SPILLWAY_INTERPOSE_CUPTI_BRIDGE_H_

#include <cstdint>
#include <string>

#include "profiler/trace/trace_writer.h"

namespace spillway::interpose {

// Starts CUPTI on `writer` (not on simgpu, named by `device_name`). True when CUPTI records
// kernel times; false when it is absent, held by another profiler or not built (said once
// through `log` where there is something to say).
bool StartCuptiRecording(trace::TraceWriter* writer, const std::string& device_name,
                         void (*log)(const std::string& line));

// Delivers what CUPTI still holds and stops it (at exit, before the trace is closed).
void StopCuptiRecording();

// While alive, CUPTI's records of this thread's driver calls carry `correlation_id`.
class CorrelationScope {
 public:
  explicit CorrelationScope(uint64_t correlation_id);
  ~CorrelationScope();
  CorrelationScope(const CorrelationScope&) = delete;
  CorrelationScope& operator=(const CorrelationScope&) = delete;

 private:
  alignas(8) unsigned char storage_[16];
  bool active_ = false;
};

}  // namespace spillway::interpose

#endif  // SPILLWAY_INTERPOSE_CUPTI_BRIDGE_H_
