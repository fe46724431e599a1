// The CUPTI recorder behind record mode (cupti_bridge.h), when the build has it.
#include "interpose/cupti_bridge.h"

#include <atomic>
#include <new>

#if SPILLWAY_HAVE_CUPTI
#include "profiler/cupti/cupti_recorder.h"
#include "profiler/cupti/cupti_trace_sink.h"
#endif

namespace spillway::interpose {

#if SPILLWAY_HAVE_CUPTI

namespace {
constinit std::atomic<bool> g_started{false};
}  // namespace

bool StartCuptiRecording(trace::TraceWriter* writer, const std::string& device_name,
                         void (*log)(const std::string& line)) {
  if (device_name.rfind("simgpu", 0) == 0) return false;  // host kernels: events time them
  static cupti::CuptiTraceSink* sink = new cupti::CuptiTraceSink(writer, {});  // never freed
  cupti::CuptiRecorderOptions options;
  options.sink = sink;
  options.log = log;
  const bool ok = cupti::StartCuptiRecorder(options).ok();
  g_started.store(ok, std::memory_order_release);
  return ok;
}

void StopCuptiRecording() {
  if (g_started.exchange(false) && cupti::CuptiRecorderActive()) {
    (void)cupti::StopCuptiRecorder(absl::Seconds(2));
  }
}

static_assert(sizeof(cupti::CuptiCorrelationScope) <= 16);

CorrelationScope::CorrelationScope(uint64_t correlation_id) {
  if (!g_started.load(std::memory_order_relaxed)) return;
  new (storage_) cupti::CuptiCorrelationScope(correlation_id);
  active_ = true;
}

CorrelationScope::~CorrelationScope() {
  if (active_)
    std::launder(reinterpret_cast<cupti::CuptiCorrelationScope*>(storage_))
        ->~CuptiCorrelationScope();
}

#else

bool StartCuptiRecording(trace::TraceWriter*, const std::string&, void (*)(const std::string&)) {
  return false;
}
void StopCuptiRecording() {}
CorrelationScope::CorrelationScope(uint64_t) {}
CorrelationScope::~CorrelationScope() {}

#endif

}  // namespace spillway::interpose
